import { constants } from 'node:os';
import {
  ErrorCode,
  isJsonValue,
  MAX_JSON_DEPTH,
  withinJsonDepth,
  type WireError,
} from '@toolgate/contracts';
import type { ProcessResult } from '@toolgate/sandbox';
import type { ToolRunOutcome } from '@toolgate/tools';
import { failedOutcome } from '../execution/call-executor';

/** Codes a subprocess tool may put in its own error (anything else becomes `tool-failed`). */
const TOOL_ERROR_CODES: ReadonlySet<string> = new Set([
  ErrorCode.ToolFailed,
  ErrorCode.ModelRetry,
  ErrorCode.InvalidArguments,
  ErrorCode.Unavailable,
]);

/** How much of stdout/stderr an error carries, so the model sees where the command failed. */
const TAIL_BYTES = 2048;
const MAX_MESSAGE = 2000;

const SIGNAL_NAMES = new Map<number, string>(
  Object.entries(constants.signals).map(([name, n]) => [n, name]),
);

/**
 * What a finished subprocess run means — the subprocess protocol's exit table. Pure.
 *
 * | the run | outcome |
 * |---|---|
 * | killed at the deadline / cancelled | `timeout` / `cancelled`, with the tails of stdout and stderr |
 * | exit 0, stdout one JSON value | ok, that value (blank stdout: `null`) |
 * | exit 0, stdout not JSON, or over the output cap | `non-serializable-result` / `tool-failed` |
 * | exit 0, stdout JSON nested deeper than {@link MAX_JSON_DEPTH} levels, or with a number out of JSON's range | `non-serializable-result` |
 * | exit ≠ 0, stdout `{"error":{"code","message"}}` with code tool-failed, model-retry, invalid-arguments or unavailable | that error |
 * | exit ≠ 0, such an error whose `details` nest too deep or hold such a number | `non-serializable-result` |
 * | exit 126 / 127 (not executable / not found in the sandbox) | `config` |
 * | exit 152 (SIGXCPU: over the CPU limit) | `tool-failed`, "exceeded its CPU time limit" |
 * | any other failure after the OOM killer ended a process of the call | `tool-failed`, "exceeded its memory limit" |
 * | any other exit ≠ 0, or a signal | `tool-failed` with the exit code (or signal) and stderr's tail |
 */
export function subprocessOutcome(
  toolName: string,
  run: ProcessResult,
  timeoutMs: number,
): ToolRunOutcome {
  const tails = () => ({
    stdoutTail: run.stdout.tail(TAIL_BYTES),
    stderrTail: run.stderr.tail(TAIL_BYTES),
  });
  if (run.ending === 'timeout') {
    return failedOutcome(
      ErrorCode.Timeout,
      `${toolName} did not finish within ${timeoutMs} ms`,
      tails(),
    );
  }
  if (run.ending === 'cancelled') {
    return failedOutcome(ErrorCode.Cancelled, `${toolName} was cancelled`, tails());
  }
  if (run.exitCode === 0) {
    if (run.stdout.truncated) {
      return failedOutcome(
        ErrorCode.ToolFailed,
        `${toolName} wrote more than its output cap to stdout`,
      );
    }
    const text = run.stdout.text();
    if (text.trim() === '') return { ok: true, result: null };
    let result: unknown;
    try {
      result = JSON.parse(text) as unknown;
    } catch {
      return failedOutcome(
        ErrorCode.NonSerializableResult,
        `${toolName} wrote something that is not JSON to stdout`,
        { stdoutTail: run.stdout.tail(TAIL_BYTES) },
      );
    }
    const unfit = unjournalable(result);
    if (unfit) {
      return failedOutcome(
        ErrorCode.NonSerializableResult,
        `${toolName} wrote JSON to stdout ${unfit}`,
      );
    }
    return { ok: true, result };
  }
  const declared = declaredError(toolName, run);
  if (declared) return { ok: false, error: declared };
  const stderrTail = run.stderr.tail(TAIL_BYTES);
  const code = run.exitCode;
  if (code === 126 || code === 127) {
    return failedOutcome(
      ErrorCode.Config,
      `${toolName}: the command ${code === 127 ? 'was not found' : 'could not be executed'} in the sandbox (exit ${code})`,
      { exitCode: code, stderrTail },
    );
  }
  if (code === 128 + constants.signals.SIGXCPU) {
    return failedOutcome(ErrorCode.ToolFailed, `${toolName} exceeded its CPU time limit`, {
      exitCode: code,
      stderrTail,
    });
  }
  if (run.memoryExceeded) {
    return failedOutcome(
      ErrorCode.ToolFailed,
      `${toolName} exceeded its memory limit: the kernel killed a process of the call`,
      { exitCode: code, stderrTail },
    );
  }
  const signal =
    run.signal ?? (code !== null && code > 128 ? SIGNAL_NAMES.get(code - 128) : undefined);
  const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  return failedOutcome(ErrorCode.ToolFailed, `${toolName} ${how}`, {
    exitCode: code,
    ...(signal ? { signal } : {}),
    stderrTail,
  });
}

/**
 * The tool's own error, when it wrote one as its stdout: `{"error":{"code","message","details"?}}`
 * (`non-serializable-result` when its details cannot be journaled).
 */
function declaredError(toolName: string, run: ProcessResult): WireError | undefined {
  if (run.stdout.truncated) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(run.stdout.text());
  } catch {
    return undefined;
  }
  const error = (parsed as { error?: unknown } | null)?.error as
    { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (typeof error !== 'object' || error === null || typeof error.message !== 'string') {
    return undefined;
  }
  const code =
    typeof error.code === 'string' && TOOL_ERROR_CODES.has(error.code)
      ? (error.code as ErrorCode)
      : ErrorCode.ToolFailed;
  const details =
    typeof error.details === 'object' && error.details !== null && !Array.isArray(error.details)
      ? (error.details as Record<string, unknown>)
      : undefined;
  const unfit = details && unjournalable(details);
  if (unfit) {
    return {
      code: ErrorCode.NonSerializableResult,
      message: `${toolName} wrote an error with details ${unfit}`,
    };
  }
  return {
    code,
    message: error.message.slice(0, MAX_MESSAGE),
    ...(details ? { details } : {}),
  };
}

/**
 * Why a value parsed from a tool's stdout cannot be journaled as it is (`nested deeper than …`), or
 * undefined when it can.
 * `JSON.parse` takes any depth (and turns `1e999` into Infinity), but encoding the settlement
 * overflows the stack on a value thousands of levels deep: such a result would never settle.
 * Bounded as JSON from outside is ({@link MAX_JSON_DEPTH}, as the remote executor's replies are),
 * checked without recursion before anything walks it.
 */
function unjournalable(value: unknown): string | undefined {
  if (!withinJsonDepth(value)) {
    return `nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`;
  }
  if (!isJsonValue(value)) return 'holding a number out of the range of JSON';
  return undefined;
}
