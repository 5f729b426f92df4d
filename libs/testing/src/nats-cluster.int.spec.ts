import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { startNatsCluster, type NatsCluster } from './nats-cluster';

describe('a three-node JetStream cluster of the test’s own', () => {
  let cluster: NatsCluster;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'harness' });
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  it('holds an R3 stream, names its leader and followers, and elects a new leader when the old one dies', async () => {
    const jsm = await cluster.jsm();
    await jsm.streams.add({ name: 'HARNESS', subjects: ['harness.>'], num_replicas: 3 });
    const before = await cluster.streamPlacement('HARNESS');
    expect(before.followers).toHaveLength(2);
    expect(before.followers).not.toContain(before.leader);

    const js = jetstream(await cluster.connect());
    await js.publish('harness.a', 'one');
    await before.leader.kill();
    expect(before.leader.running).toBe(false);
    const after = await cluster.streamPlacement('HARNESS', 30_000);
    expect(after.leader).not.toBe(before.leader);
    // The message acknowledged before the kill is on the new leader.
    const msg = await jsm.streams.getMessage('HARNESS', { last_by_subj: 'harness.a' });
    expect(msg?.string()).toBe('one');

    await before.leader.start();
    await cluster.ready();
    expect((await cluster.streamPlacement('HARNESS')).followers).toContain(before.leader);
  }, 90_000);

  it('puts a consumer’s leader on the stream’s leader, and a paused follower does not stop publishes', async () => {
    const jsm = await cluster.jsm();
    await jsm.streams.add({ name: 'HARNESS2', subjects: ['harness2.>'], num_replicas: 3 });
    await jsm.consumers.add('HARNESS2', { durable_name: 'reader', ack_policy: 'explicit' });
    await cluster.placeConsumerOnStreamLeader('HARNESS2', 'reader');
    const { leader, followers } = await cluster.streamPlacement('HARNESS2');
    expect((await cluster.consumerPlacement('HARNESS2', 'reader')).leader).toBe(leader);

    const follower = followers[0]!;
    // Connected to the leader: a client of the paused node itself would wait with it (the
    // connection picks any node, and did pick the paused one: a 10 s timeout).
    const nc = await connect({ servers: leader.url });
    const js = jetstream(nc);
    await follower.pause();
    try {
      // The leader and the other follower are a quorum: the publish is acknowledged.
      const ack = await js.publish('harness2.x', 'while paused', { timeout: 10_000 });
      expect(ack.seq).toBe(1);
    } finally {
      follower.resume();
      await nc.close();
    }
    expect(await cluster.metaLeader()).toBeDefined();
  }, 90_000);

  it('steps a stream’s leader down: another node leads it, and a message stored before is there', async () => {
    const jsm = await cluster.jsm();
    await jsm.streams.add({ name: 'HARNESS3', subjects: ['harness3.>'], num_replicas: 3 });
    // Led before the publish: an R3 stream just added may not have elected its leader yet, and a
    // publish then finds no responders.
    const before = await cluster.streamPlacement('HARNESS3');
    const js = jetstream(await cluster.connect());
    // A leader is elected before every node has heard of the stream's subjects: a publish through
    // a node that has not yet finds no responders. Waits for that, and for nothing else.
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        await js.publish('harness3.a', 'before');
        break;
      } catch (err) {
        const noResponders = /no responders/i.test(String((err as Error)?.cause ?? err));
        if (!noResponders || Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const after = await cluster.stepDown('HARNESS3');
    expect(after.leader).not.toBe(before.leader);
    expect((await cluster.streamPlacement('HARNESS3')).leader).toBe(after.leader);
    expect(
      (await jsm.streams.getMessage('HARNESS3', { last_by_subj: 'harness3.a' }))?.string(),
    ).toBe('before');
  }, 60_000);
});
