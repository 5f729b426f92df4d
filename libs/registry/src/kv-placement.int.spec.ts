import { startNatsCluster, uniqueName, type NatsCluster } from '@toolgate/testing';
import { KvCache } from './kv-cache';

/**
 * A service opening its bucket beside a cluster that is still forming (the pods of one release):
 * a node that has not joined yet leaves the meta leader too few peers for an R3 bucket ("no
 * suitable peers for placement"). The bucket's creation is asked again until the node is there.
 */
describe('a KV bucket opened while a node of the cluster is still coming up', () => {
  let cluster: NatsCluster;

  beforeAll(async () => {
    // The third node has never run: the meta leader knows two peers.
    cluster = await startNatsCluster({ label: 'kvplacement', started: 2 });
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  it('is created at three replicas once the node has joined', async () => {
    const nc = await cluster.connect('kv-placement');
    const bucket = uniqueName('kvplacement');
    const opening = KvCache.open<number>(
      nc,
      bucket,
      (raw) => (typeof raw === 'number' ? raw : null),
      {
        replicas: 3,
      },
    );
    // Asked at least once before the node has joined.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await cluster.nodes[2]!.start();
    const cache = await opening;
    const info = await (await cluster.jsm()).streams.info(`KV_${bucket}`);
    expect(info.config.num_replicas).toBe(3);
    cache.stop();
  }, 60_000);
});
