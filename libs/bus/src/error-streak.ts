import {
  journalEvent,
  RUN_KEY,
  ToolgateError,
  ErrorCode,
  type ErrorStreakEvent,
  type NewJournalEvent,
} from '@toolgate/contracts';
import type { JournalPublisher, StoredEvent } from './journal-publisher';

/** How a dispatch ended, as the error cap counts it. */
export type StreakOutcome = 'ok' | 'error' | 'denied';

/** Dispatch ids remembered per streak, so a settlement redone after a crash is applied once. */
const RECENT = 32;

/** A run's streak as its last `error-streak` event left it (none: no failures yet). */
export interface Streak {
  failures: number;
  recent: readonly string[];
}

const EMPTY: Streak = { failures: 0, recent: [] };

/**
 * The streak after a dispatch settles (pure): a failure extends it, a success ends it; a dispatch
 * already applied changes nothing (null), and neither does a success that ends no streak.
 */
export function nextStreak(
  current: Streak,
  dispatchId: string,
  outcome: StreakOutcome,
): Streak | null {
  if (current.recent.includes(dispatchId)) return null;
  if (outcome === 'ok' && current.failures === 0) return null;
  return {
    failures: outcome === 'ok' ? 0 : current.failures + 1,
    recent: [...current.recent, dispatchId].slice(-RECENT),
  };
}

/** Whether a run with this streak may dispatch under a cap of `cap` (null: no cap). */
export function isCapped(streak: Streak, cap: number | null): boolean {
  return cap !== null && streak.failures >= cap;
}

/** How many times a changed streak is re-read and re-applied after losing a race. */
const MAX_ATTEMPTS = 50;

/**
 * A run's consecutive-error streak kept in the journal (see `ErrorStreakEventSchema`): read with
 * one direct get, changed by appending the next state after the current one, so every replica and
 * every restart sees the same streak and concurrent settlements never lose a count.
 */
export class ErrorStreaks {
  constructor(
    private readonly publisher: JournalPublisher,
    private readonly now: () => Date,
  ) {}

  /** The run's streak now. */
  async current(tenant: string, runId: string): Promise<Streak> {
    return streakOf((await this.last(tenant, runId)).stored);
  }

  /** Applies a settlement; call it before publishing the `settled` event (idempotent by dispatch). */
  async record(
    tenant: string,
    runId: string,
    dispatchId: string,
    outcome: StreakOutcome,
  ): Promise<void> {
    await this.change(tenant, runId, (stored) => {
      const next = nextStreak(streakOf(stored), dispatchId, outcome);
      if (!next) return null;
      return { ...next, cause: outcome, settledDispatchId: dispatchId };
    });
  }

  /** Ends the run's streak on an explicit reset; returns the failures it had. */
  async reset(tenant: string, runId: string, by: string): Promise<number> {
    let previous = 0;
    await this.change(tenant, runId, (stored) => {
      const current = streakOf(stored);
      previous = current.failures;
      if (current.failures === 0) return null;
      return { failures: 0, recent: current.recent, cause: 'reset', resetBy: by };
    });
    return previous;
  }

  private async change(
    tenant: string,
    runId: string,
    next: (stored: StoredEvent<ErrorStreakEvent> | null) => StreakChange | null,
  ): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // After the subject's last message, whatever it is: an unsigned one (a forgery on an open
      // broker) neither resets the streak nor blocks its next state.
      const { stored, headSeq: after } = await this.last(tenant, runId);
      const state = next(stored);
      if (!state) return;
      const event: NewJournalEvent<'error-streak'> = {
        type: 'error-streak',
        // One id per transition from a given state: a retried publish of it is deduplicated, a
        // different transition from the same state is refused by the sequence expectation.
        id: `${runId}:error-streak:${after}:${state.cause}:${state.settledDispatchId ?? 'reset'}`,
        tenant,
        runId,
        dispatchId: RUN_KEY,
        at: this.now().toISOString(),
        causationId: null,
        failures: state.failures,
        cause: state.cause,
        recent: [...state.recent],
        ...(state.settledDispatchId ? { settledDispatchId: state.settledDispatchId } : {}),
        ...(state.resetBy ? { resetBy: state.resetBy.slice(0, 256) } : {}),
      };
      const appended = await this.publisher.append(journalEvent(event), {
        lastSubjectSequence: after,
      });
      if (appended.appended) return;
    }
    throw new ToolgateError(
      ErrorCode.Unavailable,
      `the error streak of run ${runId} kept changing under ${MAX_ATTEMPTS} attempts`,
    );
  }

  private last(tenant: string, runId: string) {
    return this.publisher.lastState(tenant, runId, RUN_KEY, 'error-streak');
  }
}

/** The next state of a streak and what moved it. */
interface StreakChange extends Streak {
  cause: ErrorStreakEvent['cause'];
  settledDispatchId?: string;
  resetBy?: string;
}

function streakOf(stored: StoredEvent<ErrorStreakEvent> | null): Streak {
  return stored ? { failures: stored.event.failures, recent: stored.event.recent } : EMPTY;
}
