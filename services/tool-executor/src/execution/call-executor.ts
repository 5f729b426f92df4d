import { ErrorCode, ToolgateError, type WireError } from '@toolgate/contracts';
import type { ToolRunOutcome } from '@toolgate/tools';
import type { PendingCall } from './pending-call';

/** Where and how long one call runs, as the tool runner resolved it. */
export interface CallRun {
  /** The call's pinned directory: the worktree under worktree isolation, else EXECUTOR_CWD. */
  cwd: string;
  /** What is left of the call's deadline as it starts. */
  timeoutMs: number;
  /**
   * Stops the call: the runner fires it at the call's deadline and when the replica abandons the
   * call (a stop at its drain cap). The outcome is then `cancelled` (the runner reads the reason).
   */
  signal?: AbortSignal;
}

/**
 * How long an outcome waits, after a cancel or the deadline, for an in-process tool (a builtin, a
 * script) to return once its signal fired — so "the call ended" means it stopped.
 */
export const STOP_GRACE_MS = 5_000;

/**
 * An executor the tool runner hands whole calls to (`subprocess`, `container` and `script`; the
 * builtins and remote tools it runs itself). Never throws: every failure is an outcome with a
 * stable code. Resolves only once nothing of the call runs any more — at its end, its deadline or
 * its signal (a killed process tree, a deleted container): the runner hands an abandoned call's
 * message back for another replica only then.
 */
export interface CallExecutor {
  run(call: PendingCall, run: CallRun): Promise<ToolRunOutcome>;
}

/** The outcome of a call that failed. */
export type FailedOutcome = Extract<ToolRunOutcome, { ok: false }>;

/** A failed outcome with a stable code, carrying `details` only when there are some. */
export function failedOutcome(
  code: ErrorCode,
  message: string,
  details?: Record<string, unknown>,
): FailedOutcome {
  return { ok: false, error: details ? { code, message, details } : { code, message } };
}

/**
 * The error a call stopped by `signal` ends with: the signal's reason when it is a typed error (the
 * runner's deadline `timeout`, its abandon's `cancelled`), else `<what> was cancelled`.
 */
export function abortedError(signal: AbortSignal, what = 'the call'): WireError {
  const reason: unknown = signal.reason;
  return reason instanceof ToolgateError
    ? reason.toWire()
    : { code: ErrorCode.Cancelled, message: `${what} was cancelled` };
}
