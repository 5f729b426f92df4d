import type { Verdict } from '@toolgate/contracts';

/** How the candidate's error cap bears on a replayed call. */
export type ErrorCapMark =
  /** The run's streak under the candidate reaches the cap: the call is refused (`error-cap`). */
  | 'refused'
  /**
   * The streak may reach the cap: calls before it whose outcome the journal cannot tell (a call
   * the candidate lets run that never ran, one a person would now decide) could have failed.
   */
  | 'possible'
  /** Refused by the cap when recorded; not refused under the candidate: decided by its chain. */
  | 'lifted';

/** A recorded call's verdict: the chain's, or a refusal by the error cap. */
export type RecordedVerdict = Verdict | 'error-cap';

/**
 * The runs' consecutive-error streaks replayed under a candidate policy (pure). The evaluator
 * refuses a call when its run's last `cap` settled calls all ended in an error or a denial (a
 * success ends a streak), so a candidate that denies more can trip the cap on calls it would
 * otherwise allow, and one that denies less can lift it. Fed in stream order: each call when it
 * is decided (a denial counts at once, as the evaluator records it), each settlement when it is
 * recorded. An outcome the record cannot tell under the candidate (the call did not run then, or a
 * person would decide it now) makes the streak a range: the cap is certain only when the
 * smallest streak reaches it, and `possible` while the largest does.
 */
export class ErrorCapReplay {
  private readonly runs = new Map<string, { min: number; max: number }>();
  /** Calls the candidate lets through (allow, ask), waiting for their recorded settlement. */
  private readonly open = new Map<
    string,
    { runId: string; before: RecordedVerdict; after: Verdict }
  >();

  /** `cap`: the candidate's consecutive-error cap (null: no cap). */
  constructor(readonly cap: number | null) {}

  /** Where a run stands before its next call is decided, and its streak (the smallest). */
  standing(runId: string): { mark: 'refused' | 'possible' | null; failures: number } {
    const streak = this.runs.get(runId) ?? { min: 0, max: 0 };
    if (this.cap === null) return { mark: null, failures: streak.min };
    if (streak.min >= this.cap) return { mark: 'refused', failures: streak.min };
    return { mark: streak.max >= this.cap ? 'possible' : null, failures: streak.min };
  }

  /** A call decided under the candidate (`after`), recorded then as `before`. */
  decided(runId: string, dispatchId: string, before: RecordedVerdict, after: Verdict): void {
    if (after === 'deny') return this.apply(runId, 'failure');
    this.open.set(dispatchId, { runId, before, after });
  }

  /** A recorded settlement: what it tells of the call's outcome under the candidate. */
  settled(dispatchId: string, outcome: 'ok' | 'error' | 'denied'): void {
    const call = this.open.get(dispatchId);
    if (!call) return;
    this.open.delete(dispatchId);
    const { runId, before, after } = call;
    const ran = outcome !== 'denied';
    // The same verdict: the same outcome. An ask now allowed: the tool's outcome when it ran.
    const known = before === after || (before === 'ask' && after === 'allow' && ran);
    if (!known) return this.apply(runId, 'unknown');
    this.apply(runId, outcome === 'ok' ? 'ok' : 'failure');
  }

  private apply(runId: string, what: 'ok' | 'failure' | 'unknown'): void {
    const streak = this.runs.get(runId) ?? { min: 0, max: 0 };
    if (what === 'ok') this.runs.set(runId, { min: 0, max: 0 });
    else if (what === 'failure') this.runs.set(runId, { min: streak.min + 1, max: streak.max + 1 });
    else this.runs.set(runId, { min: 0, max: streak.max + 1 });
  }
}
