import type { WireError } from '@toolgate/contracts';

/**
 * Retry by kind (pure). A failure is transient when its error says `retryable` (by default its code:
 * `unavailable`, `timeout`), permanent otherwise. The executor retries a transient failure itself,
 * with backoff, within the call's deadline — but only one that happened before the tool could
 * start (no worker serving the tool yet, the worktree service down, the broker unreachable), so a
 * retry never runs a tool twice. Everything else settles at once. An error the executor produced
 * says which kind it was (`details.retryable`); one the tool returned is passed on as it is.
 */

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 2000;

/** The pause after the `failures`-th failure in a row: 100 ms, doubling, at most 2 s. */
export function retryDelayMs(failures: number): number {
  return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.max(0, failures - 1));
}

/** Whether a thrown failure is transient: it says so (`retryable`, as `ToolgateError` carries it). */
export function isTransient(err: unknown): boolean {
  return (
    typeof err === 'object' && err !== null && (err as { retryable?: unknown }).retryable === true
  );
}

/** How a failure ended, for its settled error's details. */
export interface FailureKind {
  /** Whether the failure is transient (a later call may succeed unchanged). */
  retryable: boolean;
  /** How many times the executor tried, when it retried. */
  attempts?: number;
  /** Set when the executor retried until the call's deadline left no room for another try. */
  exhausted?: boolean;
}

/**
 * The error a call settles with: the failure's own wire error, with `details.retryable` (and, when
 * the executor retried, `attempts` and `exhausted`). The wire shape stays `{ code, message, details }`.
 */
export function settledError(error: WireError, kind: FailureKind): WireError {
  return {
    code: error.code,
    message: error.message,
    details: {
      ...error.details,
      retryable: kind.retryable,
      ...(kind.attempts !== undefined ? { attempts: kind.attempts } : {}),
      ...(kind.exhausted ? { exhausted: true } : {}),
    },
  };
}
