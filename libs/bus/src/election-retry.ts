import { JetStreamApiError } from '@nats-io/jetstream';

/**
 * How long a publish or a read that decides keeps trying while the stream elects a leader (or the
 * connection moves to another node) before its caller sees the failure: a leader change costs
 * latency, not errors (DESIGN.md). After a leader's `kill -9`, nats-server 2.9 elects its successor
 * only once a follower's election timeout (4–9 s after the last heartbeat, heartbeats every 1 s)
 * ends and it campaigns (0.1–0.8 s): up to ~11 s after the death, more on a loaded host — measured
 * to exceed a 10 s budget, which answered every call in flight at the kill with an error.
 */
export const ELECTION_BUDGET_MS = 20_000;

/** How long one attempt waits for its answer before it is sent again (same message id). */
export const ATTEMPT_TIMEOUT_MS = 2_000;

/** What a failed attempt says about the message it sent. */
export type AttemptFailure =
  /** It never reached a stream (nobody answered for it, or it was never sent): send it again. */
  | 'not-stored'
  /** Its answer was lost: it may be stored. Sent again with the same message id, it is deduplicated. */
  | 'unknown'
  /** Anything else (a refusal, a closed connection, a bug): the caller's to handle. */
  | 'final';

/**
 * Classifies an attempt's failure. While a stream has no leader its replicas answer a publish
 * with "no responders" (a 503 status) and the JetStream API answers 503 (`err_code` 10008,
 * "JetStream system temporarily unavailable"), another 5xx leaves the outcome unknown; a
 * connection that is moving to another node cannot send (`ConnectionError`); an attempt whose
 * leader died with it gets no answer (`TimeoutError`).
 * Errors raised in this process by the NATS client and `InboxRequests` are matched by name.
 */
export function attemptFailure(err: unknown): AttemptFailure {
  if (err instanceof JetStreamApiError) {
    if (err.status === 503) return 'not-stored';
    // The server failed mid-way (a 500 while its leadership changes): whether it stored the
    // message is not known, so it is sent again only when a copy is harmless.
    return err.status >= 500 ? 'unknown' : 'final';
  }
  if (!(err instanceof Error)) return 'final';
  switch (err.name) {
    case 'NoRespondersError':
    case 'ConnectionError':
      return 'not-stored';
    case 'TimeoutError':
      return 'unknown';
    default:
      return 'final';
  }
}

/** Pause before attempt `n + 1`: 50, 100, 200, 400, then 500 ms. */
function backoffMs(n: number): number {
  return Math.min(500, 50 * 2 ** (n - 1));
}

export interface ElectionRetryOptions {
  /** Total time for every attempt and pause (default {@link ELECTION_BUDGET_MS}). */
  budgetMs?: number;
  /** One attempt's time to answer (default {@link ATTEMPT_TIMEOUT_MS}), cut to what is left. */
  attemptTimeoutMs?: number;
  /**
   * Whether an attempt whose outcome is unknown is made again (default true): only when a second
   * copy is harmless — a publish with a message id (deduplicated), a read.
   */
  resendUnknown?: boolean;
  now?: () => number;
}

/**
 * Runs `attempt(timeoutMs)` until it succeeds, fails for good (`final`), or the budget is spent
 * (the last failure is thrown). Resolves with the result and whether an earlier attempt's outcome
 * was unknown (so a "duplicate" answer may be this very call's own earlier attempt).
 */
export async function retryThroughElection<T>(
  attempt: (timeoutMs: number) => Promise<T>,
  options: ElectionRetryOptions = {},
): Promise<{ value: T; earlierUnknown: boolean }> {
  const now = options.now ?? Date.now;
  const budgetMs = options.budgetMs ?? ELECTION_BUDGET_MS;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS;
  const deadline = now() + budgetMs;
  let earlierUnknown = false;
  for (let n = 1; ; n++) {
    const left = deadline - now();
    try {
      return {
        value: await attempt(Math.max(1, Math.min(attemptTimeoutMs, left))),
        earlierUnknown,
      };
    } catch (err) {
      const failure = attemptFailure(err);
      // An attempt that timed out has waited already; any other is answered at once.
      const pause = err instanceof Error && err.name === 'TimeoutError' ? 0 : backoffMs(n);
      if (failure === 'final' || now() + pause >= deadline) throw err;
      if (failure === 'unknown' && options.resendUnknown === false) throw err;
      if (failure === 'unknown') earlierUnknown = true;
      if (pause) await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * A JetStream API call (a stream's or the account's info, an ordered read's start) asked again
 * while a stream or the cluster's meta group elects a leader — meanwhile such a call goes
 * unanswered (the client's own timeout) or is answered 503 — within `budgetMs` (default three
 * election budgets: each attempt waits out the client's API timeout). For reads and other calls
 * that are harmless to repeat. What an operator runs against a cluster that just lost a node
 * (`toolgate journal …`, a rebuild) rides through the election instead of failing on it.
 */
export async function apiThroughElection<T>(
  call: () => Promise<T>,
  budgetMs = 3 * ELECTION_BUDGET_MS,
): Promise<T> {
  return (await retryThroughElection(() => call(), { budgetMs })).value;
}
