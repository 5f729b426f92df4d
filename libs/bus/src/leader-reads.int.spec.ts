import { createSubjects, type Subjects } from '@toolgate/contracts';
import {
  callEvents,
  startNatsCluster,
  testKeys,
  uniqueName,
  type NatsCluster,
} from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';

/**
 * Calls per run. On the old reads (direct gets only) 3,000 of them met a lagging follower 47–87 times
 * on a loaded 2-core machine; 5,000 keep the run near 15 s.
 */
const DISPATCHES = 5000;
/** Dispatches in flight at once. */
const CONCURRENCY = 40;

/**
 * The reads that decide, on an R3 journal whose followers lag on purpose. A direct get is answered
 * by the replica on the reader's own server (queue subscribers on the local server come first), so
 * a reader connected to a follower that has not applied an acknowledged event reads "not found".
 * Each follower is paused for 300 ms in turn (SIGSTOP): the leader and the other follower keep
 * acknowledging, and the paused one comes back behind. The writer (the gateway) and the reader (the
 * executor) are connected to different followers, as replicas of the services are in a cluster;
 * the leader serves the acks alone.
 */
describe('reads that decide on an R3 journal with lagging followers', () => {
  let cluster: NatsCluster;
  let subjects: Subjects;
  let gateway: JournalPublisher;
  let otherGateway: JournalPublisher;
  let executor: JournalPublisher;
  let stopLag: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'leaderreads' });
    subjects = createSubjects(uniqueName('leaderreads'));
    await ensureJournalStreams(await cluster.jsm(), subjects, { replicas: 3 });
    const { followers } = await cluster.streamPlacement(subjects.journal.stream);
    const on = (node: (typeof followers)[number]) =>
      cluster.connect('leader-reads', { to: node, only: true });
    gateway = new JournalPublisher(await on(followers[0]!), subjects, testKeys('gateway'));
    const second = await on(followers[1]!);
    executor = new JournalPublisher(second, subjects, testKeys('tool-executor'));
    otherGateway = new JournalPublisher(second, subjects, testKeys('gateway'));
    const lag = cluster.lagInTurn(followers);
    stopLag = () => lag.stop();
  }, 60_000);

  afterAll(async () => {
    await stopLag?.();
    gateway?.close();
    otherGateway?.close();
    executor?.close();
    await cluster?.cleanup();
  });

  it('never reads an acknowledged requested as missing, and never records a resubmitted call twice', async () => {
    let staleRefusals = 0;
    let doubleRequested = 0;
    let next = 0;
    const one = async (i: number) => {
      const { requested } = callEvents({ dispatchId: `d${i}`, runId: `run${i % 50}` });
      const first = await gateway.append(requested);
      expect(first).toMatchObject({ appended: true, duplicate: false });
      const [read, again] = await Promise.all([
        // The executor's cross-check of a decision against the recorded request.
        executor.last(requested.tenant, requested.runId, requested.dispatchId, 'requested'),
        // The caller resubmits the call at once, to another gateway replica: the broker answers
        // it as a duplicate, and the publisher's anti-forgery check must find the genuine
        // original there, not take it for a forgery and append a second one.
        otherGateway.append(requested),
      ]);
      if (!read) staleRefusals++;
      if (again.appended && again.seq !== first.seq) doubleRequested++;
    };
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < DISPATCHES) await one(next++);
      }),
    );
    await stopLag?.();
    stopLag = undefined;
    const info = await (await cluster.jsm()).streams.info(subjects.journal.stream);
    expect({ staleRefusals, doubleRequested, messages: info.state.messages }).toEqual({
      staleRefusals: 0,
      doubleRequested: 0,
      messages: DISPATCHES,
    });
  }, 600_000);
});
