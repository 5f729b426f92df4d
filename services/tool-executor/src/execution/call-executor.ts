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
 * An executor the tool runner hands whole calls to (`subprocess` today; `script` and `container`
 * plug in the same way). Never throws: every failure is an outcome with a stable code.
 */
export interface CallExecutor {
  run(call: PendingCall, run: CallRun): Promise<ToolRunOutcome>;
}
