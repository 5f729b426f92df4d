import { ErrorCode, MAX_JSON_DEPTH } from '@toolgate/contracts';
import { CappedBuffer, type ProcessResult } from '@toolgate/sandbox';
import { subprocessOutcome } from './subprocess-outcome';

function run(
  exit: Partial<Pick<ProcessResult, 'ending' | 'exitCode' | 'signal'>>,
  stdout = '',
  stderr = '',
  cap = 1024,
): ProcessResult {
  const out = new CappedBuffer(cap);
  out.push(Buffer.from(stdout));
  const err = new CappedBuffer(cap);
  err.push(Buffer.from(stderr));
  return { ending: 'exited', exitCode: 0, signal: null, ...exit, stdout: out, stderr: err };
}
const outcome = (r: ProcessResult) => subprocessOutcome('lookup', r, 5000);

it('exit 0 with one JSON value on stdout is the result; blank stdout is null', () => {
  expect(outcome(run({}, '{"answer":42}\n'))).toEqual({ ok: true, result: { answer: 42 } });
  expect(outcome(run({}, '"text"'))).toEqual({ ok: true, result: 'text' });
  expect(outcome(run({}, ' \n'))).toEqual({ ok: true, result: null });
});

it('exit 0 with stdout that is not JSON, or cut at the cap, is an error', () => {
  expect(outcome(run({}, 'hello'))).toMatchObject({
    ok: false,
    error: { code: ErrorCode.NonSerializableResult, details: { stdoutTail: 'hello' } },
  });
  expect(outcome(run({}, '{"a":"' + 'x'.repeat(100) + '"}', '', 10))).toMatchObject({
    ok: false,
    error: { code: ErrorCode.ToolFailed, message: expect.stringContaining('output cap') },
  });
});

it('a result or declared error details nested deeper than the JSON limit, or out of range, are refused', () => {
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
  const big = 1 << 16;
  // Deep enough that encoding the settlement would overflow the stack.
  expect(outcome(run({}, nested(5000), '', big))).toEqual({
    ok: false,
    error: {
      code: ErrorCode.NonSerializableResult,
      message: `lookup wrote JSON to stdout nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`,
    },
  });
  expect(outcome(run({}, nested(MAX_JSON_DEPTH + 1), '', big))).toMatchObject({
    error: { code: ErrorCode.NonSerializableResult },
  });
  expect(outcome(run({}, nested(MAX_JSON_DEPTH), '', big))).toMatchObject({ ok: true });
  expect(outcome(run({}, '{"n":1e999}'))).toMatchObject({
    error: { code: ErrorCode.NonSerializableResult, message: expect.stringContaining('range') },
  });
  const declared = (details: string) =>
    outcome(
      run(
        { exitCode: 1 },
        `{"error":{"code":"model-retry","message":"x","details":${details}}}`,
        '',
        big,
      ),
    );
  expect(declared(`{"d":${nested(5000)}}`)).toEqual({
    ok: false,
    error: {
      code: ErrorCode.NonSerializableResult,
      message: `lookup wrote an error with details nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`,
    },
  });
  expect(declared(`{"n":-1e999}`)).toMatchObject({
    error: { code: ErrorCode.NonSerializableResult },
  });
  expect(declared(`{"d":${nested(MAX_JSON_DEPTH - 1)}}`)).toMatchObject({
    error: { code: ErrorCode.ModelRetry },
  });
});

it('an error the tool writes on a non-zero exit is its outcome, its code kept when allowed', () => {
  expect(
    outcome(
      run(
        { exitCode: 1 },
        '{"error":{"code":"model-retry","message":"name a city","details":{"hint":1}}}',
      ),
    ),
  ).toEqual({
    ok: false,
    error: { code: ErrorCode.ModelRetry, message: 'name a city', details: { hint: 1 } },
  });
  expect(
    outcome(run({ exitCode: 2 }, '{"error":{"code":"unauthorized","message":"nope"}}')),
  ).toEqual({ ok: false, error: { code: ErrorCode.ToolFailed, message: 'nope' } });
});

it('maps exit codes and signals to typed errors with the stderr tail', () => {
  expect(outcome(run({ exitCode: 3 }, '', 'boom\n'))).toEqual({
    ok: false,
    error: {
      code: ErrorCode.ToolFailed,
      message: 'lookup exited with code 3',
      details: { exitCode: 3, stderrTail: 'boom\n' },
    },
  });
  expect(outcome(run({ exitCode: 127 }, '', 'prlimit: failed to execute x'))).toMatchObject({
    ok: false,
    error: { code: ErrorCode.Config, message: expect.stringContaining('not found') },
  });
  expect(outcome(run({ exitCode: 126 }))).toMatchObject({ error: { code: ErrorCode.Config } });
  expect(outcome(run({ exitCode: 152 }))).toMatchObject({
    error: { code: ErrorCode.ToolFailed, message: 'lookup exceeded its CPU time limit' },
  });
  expect(outcome(run({ exitCode: 137 }))).toMatchObject({
    error: { message: 'lookup was killed by SIGKILL', details: { signal: 'SIGKILL' } },
  });
  expect(outcome(run({ exitCode: null, signal: 'SIGSEGV' }))).toMatchObject({
    error: { message: 'lookup was killed by SIGSEGV' },
  });
});

it('a deadline or a cancel is its own code, with both tails', () => {
  expect(outcome(run({ ending: 'timeout', exitCode: null }, 'partial', 'working'))).toEqual({
    ok: false,
    error: {
      code: ErrorCode.Timeout,
      message: 'lookup did not finish within 5000 ms',
      details: { stdoutTail: 'partial', stderrTail: 'working' },
    },
  });
  expect(outcome(run({ ending: 'cancelled', exitCode: null }))).toMatchObject({
    error: { code: ErrorCode.Cancelled },
  });
});

it('a failure after the OOM killer ended a process of the call says the memory limit', () => {
  const killed = { ...run({ exitCode: 137 }, '', 'Killed'), memoryExceeded: true };
  expect(outcome(killed)).toMatchObject({
    ok: false,
    error: { code: ErrorCode.ToolFailed, message: expect.stringContaining('memory limit') },
  });
  expect(outcome(run({ exitCode: 137 }))).toMatchObject({
    error: { message: expect.stringContaining('SIGKILL') },
  });
});
