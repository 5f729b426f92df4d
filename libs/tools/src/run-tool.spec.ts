import { getEventListeners } from 'node:events';
import { z } from 'zod';
import { ErrorCode, ModelRetry, ToolgateError, type ToolContext } from '@toolgate/contracts';
import { runTool } from './run-tool';
import { tool } from './tool-definition';

const ctx: Omit<ToolContext, 'signal'> = {
  runId: 'run_1',
  dispatchId: 'dispatch_1',
  spanId: '0123456789abcdef',
  agent: { agentType: 'operator' },
  cwd: '/tmp',
  isolation: 'none',
  log: () => undefined,
};

function echo<R>(
  execute: (input: { n: number }, ctx: ToolContext) => Promise<R> | R,
  timeoutMs?: number,
) {
  return tool({
    name: 'echo',
    description: 'Echoes its input.',
    parameters: z.object({ n: z.number().int() }),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    execute,
  });
}

/** A promise that settles only when the tool's signal fires, exposing the reason. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

describe('runTool', () => {
  it('runs execute with the validated input and returns its result', async () => {
    const outcome = await runTool(
      echo(({ n }) => ({ doubled: n * 2 })),
      { n: 21 },
      ctx,
    );
    expect(outcome).toEqual({ ok: true, result: { doubled: 42 } });
  });

  it('turns arguments that fail validation into invalid-arguments with the issues, without running', async () => {
    let ran = false;
    const outcome = await runTool(
      echo(() => {
        ran = true;
        return 1;
      }),
      { n: 'three' },
      ctx,
    );
    expect(ran).toBe(false);
    expect(outcome).toEqual({
      ok: false,
      error: {
        code: ErrorCode.InvalidArguments,
        message: expect.stringContaining('invalid arguments for echo'),
        details: { tool: 'echo', issues: [expect.objectContaining({ path: ['n'] })] },
      },
    });
  });

  it('turns a ModelRetry into model-retry with its message', async () => {
    const outcome = await runTool(
      echo(() => {
        throw new ModelRetry('n must be prime; try 7');
      }),
      { n: 4 },
      ctx,
    );
    expect(outcome).toEqual({
      ok: false,
      error: { code: ErrorCode.ModelRetry, message: 'n must be prime; try 7' },
    });
  });

  it('keeps the code and details of a thrown ToolgateError', async () => {
    const outcome = await runTool(
      echo(() => {
        throw new ToolgateError(ErrorCode.PathOutsideScope, '/etc is outside the worktree', {
          details: { path: '/etc' },
        });
      }),
      { n: 1 },
      ctx,
    );
    expect(outcome).toEqual({
      ok: false,
      error: {
        code: ErrorCode.PathOutsideScope,
        message: '/etc is outside the worktree',
        details: { path: '/etc' },
      },
    });
  });

  it('turns a plain throw into tool-failed carrying the message', async () => {
    const outcome = await runTool(
      echo(async () => {
        await Promise.resolve();
        throw new Error('disk full');
      }),
      { n: 1 },
      ctx,
    );
    expect(outcome).toEqual({
      ok: false,
      error: { code: ErrorCode.ToolFailed, message: 'echo failed: disk full' },
    });
  });

  it('bounds the message of a plain throw', async () => {
    const outcome = await runTool(
      echo(() => {
        throw new Error('x'.repeat(10_000));
      }),
      { n: 1 },
      ctx,
    );
    expect(outcome.ok).toBe(false);
    const { message } = (outcome as { error: { message: string } }).error;
    expect(message.length).toBeLessThan(2100);
    expect(message.startsWith('echo failed: xxx')).toBe(true);
  });

  it.each<[string, () => unknown]>([
    ['a function', () => () => 1],
    ['a BigInt', () => ({ count: BigInt(1) })],
    [
      'a cycle',
      () => {
        const node: Record<string, unknown> = {};
        node.self = node;
        return node;
      },
    ],
  ])('turns %s in the result into non-serializable-result', async (_what, make) => {
    const outcome = await runTool(echo(make), { n: 1 }, ctx);
    expect(outcome).toEqual({
      ok: false,
      error: {
        code: ErrorCode.NonSerializableResult,
        message: expect.stringContaining('echo returned a value that is not JSON'),
      },
    });
  });

  it('returns null for undefined', async () => {
    expect(
      await runTool(
        echo(() => undefined),
        { n: 1 },
        ctx,
      ),
    ).toEqual({ ok: true, result: null });
  });

  it('times out a tool that outlives its deadline, and fires the signal the tool was given', async () => {
    let seen: AbortSignal | undefined;
    const outcome = await runTool(
      echo((_input, { signal }) => {
        seen = signal;
        return new Promise<never>(() => undefined);
      }, 20),
      { n: 1 },
      ctx,
    );
    expect(outcome).toEqual({
      ok: false,
      error: { code: ErrorCode.Timeout, message: 'echo did not finish within 20 ms' },
    });
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as ToolgateError).code).toBe(ErrorCode.Timeout);
  });

  it('an options.timeoutMs overrides the policy deadline', async () => {
    const outcome = await runTool(
      echo((_input, { signal }) => untilAborted(signal), 3_600_000),
      { n: 1 },
      ctx,
      { timeoutMs: 10 },
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCode.Timeout } });
  });

  it('is cancelled when the caller aborts mid-run, and the tool sees its signal fire', async () => {
    const caller = new AbortController();
    let toolSignal: AbortSignal | undefined;
    const running = runTool(
      echo((_input, { signal }) => {
        toolSignal = signal;
        queueMicrotask(() => caller.abort());
        return untilAborted(signal);
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
    );
    expect(await running).toEqual({
      ok: false,
      error: { code: ErrorCode.Cancelled, message: 'echo was cancelled' },
    });
    expect(toolSignal?.aborted).toBe(true);
  });

  it('is cancelled without running when the caller signal is already aborted', async () => {
    const caller = new AbortController();
    caller.abort();
    let ran = false;
    const outcome = await runTool(
      echo(() => {
        ran = true;
        return 'late';
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
    );
    // A cancelled call must not have effects the journal then records as never having happened.
    expect(ran).toBe(false);
    expect(outcome).toEqual({
      ok: false,
      error: { code: ErrorCode.Cancelled, message: 'echo was cancelled' },
    });
  });

  it('keeps a ToolgateError the caller aborted with as the outcome', async () => {
    const caller = new AbortController();
    const outcome = await runTool(
      echo((_input, { signal }) => {
        queueMicrotask(() => caller.abort(new ToolgateError(ErrorCode.Timeout, 'run deadline')));
        return untilAborted(signal);
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
    );
    expect(outcome).toEqual({
      ok: false,
      error: { code: ErrorCode.Timeout, message: 'run deadline' },
    });
  });

  it('aborts the tool signal once the run is over, and detaches from the caller signal', async () => {
    const caller = new AbortController();
    let toolSignal: AbortSignal | undefined;
    const outcome = await runTool(
      echo((_input, { signal }) => {
        toolSignal = signal;
        return 'done';
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
    );
    expect(outcome).toEqual({ ok: true, result: 'done' });
    expect(toolSignal?.aborted).toBe(true);
    expect((toolSignal?.reason as ToolgateError).code).toBe(ErrorCode.Cancelled);
    // A long-lived caller signal (a consumer's) must not keep a listener per finished run.
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });

  it('with a stop grace, answers a cancel only once the tool has stopped', async () => {
    const caller = new AbortController();
    const steps: string[] = [];
    const outcome = await runTool(
      echo(async (_input, { signal }) => {
        queueMicrotask(() => caller.abort());
        await untilAborted(signal).catch(() => undefined);
        // Cleaning up after the signal (a process tree being killed) takes a few turns.
        for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
        steps.push('tool stopped');
        return 'late';
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
      { stopGraceMs: 60_000 },
    );
    steps.push('outcome');
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCode.Cancelled } });
    expect(steps).toEqual(['tool stopped', 'outcome']);
  });

  it('with a stop grace, does not wait past it for a tool that ignores its signal', async () => {
    const caller = new AbortController();
    const outcome = await runTool(
      echo(() => {
        queueMicrotask(() => caller.abort());
        return new Promise<never>(() => undefined);
      }),
      { n: 1 },
      { ...ctx, signal: caller.signal },
      { stopGraceMs: 20 },
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCode.Cancelled } });
  });
});
