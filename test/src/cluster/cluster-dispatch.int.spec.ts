import { startNatsCluster, type ClusterNode, type NatsCluster } from '@toolgate/testing';
import { runJournalCounts } from '../support/dispatch-probes';
import { answerFaults, errorAnswers, submitTwice } from '../support/partitioned-tenants';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/** Calls per phase, and how many are in flight at once. */
const LAGGING_CALLS = 600;
const LEADER_KILL_CALLS_AFTER = 150;
const CONCURRENCY = 12;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The whole of Toolgate in the shape `deploy/k8s` runs it: a 3-node JetStream cluster with R3
 * streams, the services connected to the stream's followers, the consumers led by the stream's
 * leader. Each follower is paused (SIGSTOP) for 300 ms in turn, so the services read from replicas
 * that lag the leader; then the stream leader is killed under load.
 */
describe('dispatches on a three-node cluster with R3 streams', () => {
  let cluster: NatsCluster;
  let stack: TestStack;
  let followers: ClusterNode[];
  let runIds = 0;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'stack' });
    // The services start on the followers of the stream they create: the journal's placement is
    // not known before it exists, so every node but one is given, and the stream placed after.
    stack = await startTestStack(
      'cluster',
      { TOOLGATE_STREAM_REPLICAS: '3' },
      { servers: cluster.servers },
    );
    const stream = stack.nats.subjects.journal.stream;
    const jsm = await cluster.jsm();
    for await (const consumer of jsm.consumers.list(stream))
      await cluster.placeConsumerOnStreamLeader(stream, consumer.name);
    ({ followers } = await cluster.streamPlacement(stream));
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await cluster?.cleanup();
  }, 60_000);

  /** Submits a call and resubmits it at once (another client's retry), then waits for it. */
  const dispatch = (runId: string, callId: string) =>
    submitTwice(stack, TOKENS.acmeAgent, runId, callId);

  /** The stream's `requested` and `settled` counts per dispatch of a run. */
  const countsOf = async (runId: string) =>
    runJournalCounts(stack, await cluster.jsm(), 'acme', runId);

  /**
   * Every call of the run answered without an error (accepted, then replayed with an ok
   * settlement), and `dispatches` dispatches recorded, each with one `requested` and one `settled`.
   */
  async function expectEachAnsweredAndRecordedOnce(
    runId: string,
    results: Awaited<ReturnType<typeof dispatch>>[],
    dispatches: number,
  ) {
    const t = answerFaults(results);
    const counts = await countsOf(runId);
    const twice = [...counts.values()].filter(
      (c) => (c.requested ?? 0) !== 1 || (c.settled ?? 0) !== 1,
    );
    expect({
      ...t,
      dispatches: counts.size,
      twice: twice.length,
      errorAnswers: errorAnswers(results),
    }).toEqual({
      errors: 0,
      errorAnswers: [],
      notAccepted: 0,
      notReplayed: 0,
      notOk: 0,
      dispatches,
      twice: 0,
    });
  }

  it('reads nothing stale while followers lag: no call refused, none recorded twice', async () => {
    const runId = `lag-${runIds++}`;
    const lag = cluster.lagInTurn(followers);
    const results: Awaited<ReturnType<typeof dispatch>>[] = [];
    let next = 0;
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < LAGGING_CALLS) results.push(await dispatch(runId, `c${next++}`));
        }),
      );
    } finally {
      await lag.stop();
    }
    await expectEachAnsweredAndRecordedOnce(runId, results, LAGGING_CALLS);
  }, 300_000);

  it('answers no error while the stream leader is killed, and settles every call once', async () => {
    const runId = `kill-${runIds++}`;
    const { leader } = await cluster.streamPlacement(stack.nats.subjects.journal.stream);
    const results: Awaited<ReturnType<typeof dispatch>>[] = [];
    let next = 0;
    let killed = false;
    let afterKill = 0;
    const clients = Array.from({ length: CONCURRENCY }, async () => {
      while (!killed || afterKill < LEADER_KILL_CALLS_AFTER) {
        results.push(await dispatch(runId, `c${next++}`));
        if (killed) afterKill++;
      }
    });
    await sleep(1000);
    await leader.kill();
    killed = true;
    await Promise.all(clients);
    await expectEachAnsweredAndRecordedOnce(runId, results, next);
    await leader.start();
  }, 300_000);
});
