import { createSubjects } from '@toolgate/contracts';
import { startNatsCluster, uniqueName, type NatsCluster } from '@toolgate/testing';
import { ensureJournalStreams } from './index';

/**
 * Services start beside a cluster that is still forming (the pods of one release): a node that
 * has not joined yet leaves the meta leader too few peers to place an R3 stream on ("no suitable
 * peers for placement"), which failed a service's start-up. Its creation is asked again until the
 * node is there.
 */
describe('the journal streams created while a node of the cluster is still coming up', () => {
  let cluster: NatsCluster;

  beforeAll(async () => {
    // The third node has never run: the meta leader knows two peers.
    cluster = await startNatsCluster({ label: 'placement', started: 2 });
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  it('are created at three replicas once the node has joined', async () => {
    const late = cluster.nodes[2]!;
    const jsm = await cluster.jsm();
    const subjects = createSubjects(uniqueName('placement'));
    const creating = ensureJournalStreams(jsm, subjects, { replicas: 3 });
    // Asked at least once before the node has joined.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await late.start();
    await creating;
    const info = await jsm.streams.info(subjects.journal.stream);
    expect(info.config.num_replicas).toBe(3);
  }, 60_000);
});
