import type { AgentRef, Isolation } from './events';

/** Log levels a tool may emit through {@link ToolContext.log}. */
export type ToolLogLevel = 'debug' | 'info' | 'warn' | 'error';

/**
 * What `execute(input, ctx)` receives besides its validated input. Built by the tool-executor for
 * in-process tools and by the SDK for remote tools, from the dispatch's events.
 */
export interface ToolContext {
  /** The run the call belongs to. */
  readonly runId: string;
  /** The dispatch id: also the idempotency key for effectful tools (execution is at least once). */
  readonly dispatchId: string;
  /** The tool span's id (W3C, 16 hex characters), for correlating the tool's own telemetry. */
  readonly spanId: string;
  readonly agent: AgentRef;
  /** The isolation working directory: the host cwd, or inside the worktree. */
  readonly cwd: string;
  readonly isolation: Isolation;
  /** Fires on cancellation and on the tool's deadline. Long-running tools should observe it. */
  readonly signal: AbortSignal;
  /** Emits a telemetry log event; never writes journal entries. */
  log(level: ToolLogLevel, message: string, data?: Record<string, unknown>): void;
}
