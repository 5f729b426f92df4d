import { createSubjects, type Subjects } from '@toolgate/contracts';
import {
  requestedEvent,
  startNatsCluster,
  testKeys,
  uniqueName,
  type NatsCluster,
} from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';

/**
 * Calls per run, pipelined ({@link CONCURRENCY} in flight): the first half with a steady leader,
 * the second after a graceful leader change. On the old reads (direct gets only) 3,000 of them met
 * a lagging follower 47–87 times on a loaded 2-core machine.
 */
const DISPATCHES = 20_000;
/** Dispatches in flight at once: 20,000 take about as long as 5,000 did forty at a time. */
const CONCURRENCY = 100;
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

  it(`never reads an acknowledged requested as missing, and never records a resubmitted call twice — ${DISPATCHES} calls, the second half after a leader change`, async () => {
    let staleRefusals = 0;
    let doubleRequested = 0;
    let next = 0;
    let failed = false;
    const one = async (i: number) => {
      const requested = requestedEvent({ dispatchId: `d${i}`, runId: `run${i % 50}` });
      const first = await gateway.append(requested);
      // A plain check, not `expect` on each of 20,000 calls (a matcher builds an error, stack
      // included, on every call): the first wrong answer still fails the test and stops the run.
      if (!first.appended || first.duplicate)
        throw new Error(`the first append of d${i} answered ${JSON.stringify(first)}`);
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
    // The second half: the stream's leader steps down (the followers' lag paused meanwhile), and
    // the new leader's followers are the ones made to lag.
    const leaderChange = (async () => {
      while (next < DISPATCHES / 2 && !failed) await new Promise((r) => setTimeout(r, 50));
      await stopLag?.();
      const { followers } = await cluster.stepDown(subjects.journal.stream, 30_000);
      const lag = cluster.lagInTurn(followers);
      stopLag = () => lag.stop();
    })();
    await Promise.all([
      leaderChange,
      ...Array.from({ length: CONCURRENCY }, async () => {
        try {
          while (next < DISPATCHES && !failed) await one(next++);
        } catch (err) {
          // The others stop too, so the run ends with the first failure.
          failed = true;
          throw err;
        }
      }),
    ]);
    await stopLag?.();
    stopLag = undefined;
    // What the journal holds, not what the writers believe: one `requested` per call.
    const info = await (await cluster.jsm()).streams.info(subjects.journal.stream);
    expect({ staleRefusals, doubleRequested, messages: info.state.messages }).toEqual({
      staleRefusals: 0,
      doubleRequested: 0,
      messages: DISPATCHES,
    });
  }, 600_000);
});
