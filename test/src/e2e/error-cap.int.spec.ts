import { runCli } from '@toolgate/cli';
import { startPermissionEvaluator } from '@toolgate/permission-evaluator';
import type { RunningService } from '@toolgate/service-kit';
import { eventually } from '@toolgate/testing';
import { serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const agent = { agentType: 'coder', label: 'error-cap' };
let seq = 0;
const unique = (label: string) => `${label}-${process.pid}-${++seq}`;

/**
 * The consecutive-error cap: after N calls of a run in a row ended in an error or a denial (5 by
 * default, the policy's `errorCap`), the run's next dispatch is refused with `error-cap` until a
 * call succeeds or someone resets the cap — held in the journal, so a second evaluator replica and
 * a restarted stack refuse it too.
 */
describe('the consecutive-error cap, over the whole stack', () => {
  let stack: TestStack;
  /** Inputs the worker received: a refused dispatch never reaches it. */
  const received: { run: string; mode: string }[] = [];

  beforeAll(async () => {
    stack = await startTestStack('errorcap');
    for (const [tenant, token] of [
      ['acme', TOKENS.acmeAdmin],
      ['globex', TOKENS.globexAdmin],
    ] as const) {
      await serveRemoteTool(
        stack,
        {
          name: 'flaky',
          description: 'Fails or succeeds as asked.',
          parameters: {
            type: 'object',
            properties: { run: { type: 'string' }, mode: { enum: ['ok', 'fail'] } },
            required: ['run', 'mode'],
          },
        },
        (input) => {
          const i = input as { run: string; mode: string };
          received.push(i);
          return i.mode === 'ok'
            ? { ok: true, result: 'fine' }
            : { ok: false, error: { code: 'tool-failed', message: 'it broke' } };
        },
        { tenant, token },
      );
    }
  });
  afterAll(() => stack.stop());

  const call = async (runId: string, mode: 'ok' | 'fail', token: string = TOKENS.acmeAgent) => {
    const res = await stack.http('POST', '/v1/dispatches', token, {
      runId,
      callId: unique('call'),
      agent,
      tool: 'flaky',
      input: { run: runId, mode },
      wait: 10_000,
    });
    expect(res.status).toBe(200);
    return res.body.settled as { outcome: string; error?: { code: string; details?: unknown } };
  };
  const ranFor = (runId: string) => received.filter((r) => r.run === runId).length;

  it('refuses the sixth dispatch after five errors with error-cap, without running it, until a reset', async () => {
    const run = unique('run');
    for (let i = 0; i < 5; i++) {
      expect(await call(run, 'fail')).toMatchObject({ error: { code: 'tool-failed' } });
    }
    const refused = await call(run, 'ok');
    expect(refused).toMatchObject({
      outcome: 'error',
      error: { code: 'error-cap', details: { failures: 5, consecutive: 5, runId: run } },
    });
    expect(ranFor(run)).toBe(5);
    // The refusal itself does not move the streak, and keeps refusing.
    expect((await call(run, 'ok')).error?.code).toBe('error-cap');

    // Another run of the tenant is not affected.
    expect((await call(unique('run'), 'ok')).outcome).toBe('ok');

    // Resetting needs the approve scope; the agent's token cannot.
    const forbidden = await stack.http(
      'POST',
      `/v1/runs/${run}/error-cap/reset`,
      TOKENS.acmeAgent,
      {},
    );
    expect(forbidden.status).toBe(403);
    const reset = await stack.http(
      'POST',
      `/v1/runs/${run}/error-cap/reset`,
      TOKENS.acmeApprover,
      {},
    );
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ runId: run, previousFailures: 5, failures: 0 });
    expect((await call(run, 'ok')).outcome).toBe('ok');
    expect(ranFor(run)).toBe(6);
  });

  it('counts denials with errors, and a success starts the count again', async () => {
    const run = unique('run');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { deny: [{ tool: 'write_file', reason: 'no writes' }] } },
    });
    expect(put.status).toBe(200);
    const denied = () =>
      stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: run,
        callId: unique('call'),
        agent,
        tool: 'write_file',
        input: { path: 'x.txt', content: 'x' },
        wait: 10_000,
      });
    await eventually(
      async () => ((await denied()).body?.settled?.outcome === 'denied' ? true : undefined),
      { timeoutMs: 15_000, what: 'the deny policy in force' },
    );
    // One denial so far (the probe above); a success ends that streak.
    expect((await call(run, 'ok')).outcome).toBe('ok');
    for (let i = 0; i < 3; i++) await call(run, 'fail');
    expect((await call(run, 'ok')).outcome).toBe('ok');
    for (let i = 0; i < 3; i++) await call(run, 'fail');
    expect((await denied()).body.settled.outcome).toBe('denied');
    expect((await denied()).body.settled.outcome).toBe('denied');
    expect((await call(run, 'ok')).error?.code).toBe('error-cap');
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
  });

  it('takes its size from the policy, and can be turned off', async () => {
    const put = (document: unknown) =>
      stack.http('PUT', '/v1/policy', TOKENS.globexAdmin, { document });
    expect((await put({ errorCap: { consecutive: 2 } })).status).toBe(200);
    const run = unique('run');
    // Until the evaluator has the new policy the default (5) applies: fail until capped.
    let failures = 0;
    while ((await call(run, 'fail', TOKENS.globexAdmin)).error?.code !== 'error-cap') {
      failures++;
      expect(failures).toBeLessThanOrEqual(5);
    }
    const capped = await call(run, 'ok', TOKENS.globexAdmin);
    expect(capped.error?.details).toMatchObject({ consecutive: 2 });

    expect((await put({ errorCap: false })).status).toBe(200);
    await eventually(
      async () => ((await call(run, 'ok', TOKENS.globexAdmin)).outcome === 'ok' ? true : undefined),
      { timeoutMs: 15_000, what: 'the cap turned off' },
    );
    const off = unique('run');
    for (let i = 0; i < 8; i++) await call(off, 'fail', TOKENS.globexAdmin);
    expect((await call(off, 'ok', TOKENS.globexAdmin)).outcome).toBe('ok');

    expect((await put({ errorCap: { consecutive: 0 } })).status).toBe(422);
    expect((await put({ errorCap: { size: 3 } })).status).toBe(422);
    await put({});
  });

  it('holds on a second evaluator replica and across a restart of the whole stack; the CLI resets it', async () => {
    const run = unique('run');
    for (let i = 0; i < 5; i++) await call(run, 'fail');
    const replica: RunningService = await startPermissionEvaluator({
      config: stack.options.evaluator,
      logger: false,
    });
    try {
      // Two replicas share the durable consumer: whichever decides, the run is refused.
      for (let i = 0; i < 6; i++) expect((await call(run, 'ok')).error?.code).toBe('error-cap');
    } finally {
      await replica.stop();
    }
    await stack.restart();
    expect((await call(run, 'ok')).error?.code).toBe('error-cap');
    expect(ranFor(run)).toBe(5);

    let stdout = '';
    const code = await runCli(['runs', 'reset-error-cap', run], {
      env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: TOKENS.acmeApprover },
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: () => undefined },
    });
    expect(code).toBe(0);
    expect(stdout).toContain(`reset the error cap of run ${run} (5 failures in a row)`);
    expect((await call(run, 'ok')).outcome).toBe('ok');
  });
});
