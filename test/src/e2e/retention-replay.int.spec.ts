import { nanos } from '@nats-io/transport-node';
import { BROKER_SHAPES, eventually, startTestBroker, type TestBroker } from '@toolgate/testing';
import { journalCounts, settled } from '../support/dispatch-probes';
import { serveRemoteTool, type ServedTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A call resubmitted after the journal stream's retention dropped its events: the stream no longer
 * deduplicates it, the projection (which keeps every dispatch) does — the gateway answers
 * `replayed` with the recorded outcome and the tool does not run a second time. On one node with
 * R1 streams, and on a 3-node cluster with R3 streams.
 */
describe.each(BROKER_SHAPES)('a replay older than the stream retention ($shape)', (shape) => {
  let broker: TestBroker;
  let stack: TestStack;
  let worker: ServedTool;
  const runs: unknown[] = [];

  beforeAll(async () => {
    broker = await startTestBroker(shape, 'retention');
    // Its one tool is a remote one and nothing waits on an approval's timeout: no sandbox (its
    // probe and file helpers) and the journal's sweep at its default pace, not the stack's 100 ms.
    stack = await startTestStack(
      'retention',
      { EXECUTOR_SANDBOX: 'off', JOURNAL_SWEEP_INTERVAL_MS: '1000' },
      broker,
    );
    const journal = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream);
    expect(journal.config.num_replicas).toBe(shape.replicas);
    worker = await serveRemoteTool(
      stack,
      {
        name: 'counted_lookup',
        description: 'Counts its runs.',
        parameters: { type: 'object' },
      },
      (input) => {
        runs.push(input);
        return { ok: true, result: { run: runs.length } };
      },
    );
  }, 120_000);
  afterAll(async () => {
    worker?.stop();
    await stack?.stop();
    await broker?.cleanup();
  }, 60_000);

  const submit = (callId: string) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-retention',
      callId,
      agent: { agentType: 'coder' },
      tool: 'counted_lookup',
      input: { q: callId },
      wait: 20_000,
    });

  it('answers from the projection: replayed with its outcome, never run again', async () => {
    const first = await submit('c1');
    expect(first.body).toMatchObject({
      status: 'accepted',
      state: 'settled',
      settled: { outcome: 'ok', result: { run: 1 } },
    });
    const dispatchId: string = first.body.dispatchId;
    await settled(stack, dispatchId);

    // Retention of one second (as JOURNAL_STREAM_MAX_AGE_MS would set it, here below the minimum
    // the journal accepts): the broker drops the call's events, then keeps what comes next.
    const { jsm, subjects } = stack.nats;
    const { config } = await jsm.streams.info(subjects.journal.stream);
    await jsm.streams.update(subjects.journal.stream, {
      ...config,
      max_age: nanos(1000),
      duplicate_window: nanos(1000),
    });
    await eventually(
      async () =>
        Object.keys(await journalCounts(stack, 'acme', 'run-retention', dispatchId)).length === 0
          ? true
          : undefined,
      { what: "the call's events aged out of the stream" },
    );
    await jsm.streams.update(subjects.journal.stream, config);
    // The gateway believes "nothing dropped yet" for a second at most.
    await sleep(1500);

    const again = await submit('c1');
    expect(again.status).toBe(200);
    expect(again.body).toEqual({
      dispatchId,
      status: 'replayed',
      state: 'settled',
      settled: { outcome: 'ok', result: { run: 1 } },
    });
    expect(runs).toHaveLength(1);
    // Nothing journaled again for it.
    expect(await journalCounts(stack, 'acme', 'run-retention', dispatchId)).toEqual({});

    // A new call is still accepted and run: the projection knows nothing of it.
    const next = await submit('c2');
    expect(next.body).toMatchObject({
      status: 'accepted',
      state: 'settled',
      settled: { outcome: 'ok', result: { run: 2 } },
    });
  }, 60_000);
});
