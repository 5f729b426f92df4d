import { eventually, startNatsCluster, type NatsCluster } from '@toolgate/testing';
import { runJournalCounts } from '../support/dispatch-probes';
import { answerFaults, errorAnswers, submitTwice } from '../support/partitioned-tenants';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * A 3-node cluster with R3 streams that loses two nodes, the stream's leader among them: no
 * leader can be elected until one is back. The gateway rides out what it can (20 s) and then says
 * so — `503 unavailable`, retryable — never a `500 internal`; once a node is back, the same calls
 * go through and each is recorded once.
 */
describe('the gateway while the cluster has lost its quorum', () => {
  let cluster: NatsCluster;
  let stack: TestStack;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'quorum' });
    stack = await startTestStack(
      'quorum',
      { TOOLGATE_STREAM_REPLICAS: '3' },
      { servers: cluster.servers },
    );
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await cluster?.cleanup();
  }, 60_000);

  it('answers 503 unavailable, never 500, and records each call once after a node is back', async () => {
    const runId = 'quorum';
    const dispatch = (callId: string) => submitTwice(stack, TOKENS.acmeAgent, runId, callId);
    const before = await dispatch('before');
    expect(answerFaults([before])).toEqual({ errors: 0, notAccepted: 0, notReplayed: 0, notOk: 0 });

    const stream = stack.nats.subjects.journal.stream;
    const { leader, followers } = await cluster.streamPlacement(stream);
    await leader.kill();
    await followers[0]!.kill();
    // A new call, and the call made before: a submission and a replay, both needing a leader.
    const during = await Promise.all([dispatch('during'), dispatch('before')]);
    const answers = during.flatMap(({ first, again }) => [first, again]);
    expect({
      statuses: [...new Set(answers.map((a) => a.status))].filter((s) => s !== 200),
      notUnavailable: answers
        .filter((a) => a.status !== 200 && a.body?.error?.code !== 'unavailable')
        .map((a) => `${a.status} ${a.body?.error?.code}: ${a.body?.error?.message}`),
    }).toEqual({ statuses: [503], notUnavailable: [] });

    await followers[0]!.start();
    await cluster.streamPlacement(stream, 60_000);
    const after = [await dispatch('during'), await dispatch('before'), await dispatch('after')];
    const { errors, notReplayed } = answerFaults(after);
    // 'during' may have been stored just before the quorum went and run through the outage: it
    // settles once, with whatever outcome that run had; the others settle ok.
    const { notOk } = answerFaults([after[1]!, after[2]!]);
    expect({
      errors,
      errorAnswers: errorAnswers(after),
      notReplayed,
      notOk,
      // 'during' was refused (or, had the quorum gone after its append, replayed); 'before' was
      // recorded before the loss.
      firstAnswers: after.map(({ first }) => first.body?.status),
    }).toEqual({
      errors: 0,
      errorAnswers: [],
      notReplayed: 0,
      notOk: 0,
      firstAnswers: [expect.stringMatching(/^(accepted|replayed)$/), 'replayed', 'accepted'],
    });

    // 'during' may still be on its way: the pipeline's consumers elect their leaders after the
    // stream's (4–9 s each here, more on a loaded machine), which can outlast its 20 s wait. Read
    // once all three are settled — or, after a minute, as they are.
    const jsm = await cluster.jsm();
    const counts = await eventually(
      async () => {
        const now = await runJournalCounts(stack, jsm, 'acme', runId);
        return now.size === 3 && [...now.values()].every((c) => c.settled) ? now : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'every call of the run settled' },
    ).catch(() => runJournalCounts(stack, jsm, 'acme', runId));
    expect([...counts.values()]).toEqual(
      Array.from({ length: 3 }, () => expect.objectContaining({ requested: 1, settled: 1 })),
    );
    await leader.start();
  }, 240_000);
});
