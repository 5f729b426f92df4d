import type { ErrorCode } from '@toolgate/contracts';
import type { ToolRunOutcome } from '@toolgate/tools';
import type { PendingCall } from './pending-call';

/** Where and how long one call runs, as the tool runner resolved it. */
export interface CallRun {
  /** The call's pinned directory: the worktree under worktree isolation, else EXECUTOR_CWD. */
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * An executor the tool runner hands whole calls to (`subprocess`, `container` and `script`; the
 * builtins and remote tools it runs itself). Never throws: every failure is an outcome with a
 * stable code.
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
