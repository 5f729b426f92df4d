import {
  WHATIF_CAP_CALLS_BUDGET_BYTES,
  WHATIF_CHANGES_BUDGET_BYTES,
  type PolicyWhatIfReport,
  type Verdict,
  type WhatIfChange,
  type WhatIfErrorCapCall,
  type WhatIfErrorCapMark,
} from '@toolgate/contracts';
import type { RecordedCall, ReplayedCall } from './policy-replay';

/** What the report says about remote hooks, which a replay never calls. */
export const WHATIF_HOOKS_NOTE =
  'remote hooks and canUseTool were not called: the verdicts they recorded were reused; ' +
  'calls marked "unknown" reached a hook whose answer the journal does not record, ' +
  'which was taken to pass, so their new verdict depends on that hook';

/**
 * Adds up replayed calls into a {@link PolicyWhatIfReport} (pure: the caller streams the calls in).
 * Counts cover every call; the changed calls are listed in the order they were added, up to
 * `limit` and to a byte budget (`WHATIF_CHANGES_BUDGET_BYTES`; the error cap's calls
 * `WHATIF_CAP_CALLS_BUDGET_BYTES`).
 */
export class WhatIfTally {
  private calls = 0;
  private changed = 0;
  private undecided = 0;
  private skippedErrorCap = 0;
  private hooksReused = 0;
  private hooksUnknown = 0;
  private firstSeq = 0;
  private lastSeq = 0;
  private readonly byTool = new Map<string, { calls: number; changed: number }>();
  private readonly byChange = new Map<string, number>();
  private readonly changes: WhatIfChange[] = [];
  private readonly capCounts = { refused: 0, possible: 0, lifted: 0 };
  private readonly capCalls: WhatIfErrorCapCall[] = [];
  private readonly listed = {
    changes: new ListBudget(WHATIF_CHANGES_BUDGET_BYTES),
    capCalls: new ListBudget(WHATIF_CAP_CALLS_BUDGET_BYTES),
  };

  constructor(
    private readonly limit: number,
    private readonly window: { since?: string | undefined; runId?: string | undefined } = {},
    /** The candidate's error cap, when the replay modelled it (its report then says so). */
    private readonly errorCap?: { cap: number | null },
  ) {}

  /** A message of the window was read (extends the window's sequences). */
  saw(seq: number): void {
    if (this.firstSeq === 0 || seq < this.firstSeq) this.firstSeq = seq;
    if (seq > this.lastSeq) this.lastSeq = seq;
  }

  /** A requested call without a decision in the window. */
  addUndecided(count = 1): void {
    this.undecided += count;
  }

  add(call: RecordedCall, replayed: ReplayedCall, errorCap?: WhatIfErrorCapMark): void {
    if (replayed.kind === 'error-cap') {
      this.skippedErrorCap++;
      return;
    }
    if (errorCap) {
      this.capCounts[errorCap]++;
      if (this.capCalls.length < this.limit) {
        const entry: WhatIfErrorCapCall = {
          seq: call.seq,
          dispatchId: call.decided.dispatchId,
          runId: call.decided.runId,
          callId: call.requested.callId,
          mark: errorCap,
          verdict: replayed.after.verdict,
        };
        if (this.listed.capCalls.fits(entry)) this.capCalls.push(entry);
      }
    }
    this.calls++;
    const tool = call.decided.tool.name;
    let perTool = this.byTool.get(tool);
    if (!perTool) this.byTool.set(tool, (perTool = { calls: 0, changed: 0 }));
    perTool.calls++;
    if (replayed.hooks === 'reused') this.hooksReused++;
    else if (replayed.hooks === 'unknown') this.hooksUnknown++;
    if (!replayed.changed) return;
    this.changed++;
    perTool.changed++;
    const change = `${replayed.before.verdict}>${replayed.after.verdict}`;
    this.byChange.set(change, (this.byChange.get(change) ?? 0) + 1);
    if (this.changes.length >= this.limit || this.listed.changes.full) return;
    const { requested, decided } = call;
    const entry: WhatIfChange = {
      seq: call.seq,
      dispatchId: decided.dispatchId,
      runId: decided.runId,
      callId: requested.callId,
      tool,
      agent: decided.agent,
      ...(decided.profile !== undefined ? { profile: decided.profile } : {}),
      at: decided.at,
      before: replayed.before,
      after: replayed.after,
      ...(replayed.hooks ? { hooks: replayed.hooks } : {}),
      ...(errorCap ? { errorCap } : {}),
    };
    if (this.listed.changes.fits(entry)) this.changes.push(entry);
  }

  report(): PolicyWhatIfReport {
    return {
      window: {
        firstSeq: this.firstSeq,
        lastSeq: this.lastSeq,
        ...(this.window.since !== undefined ? { since: this.window.since } : {}),
        ...(this.window.runId !== undefined ? { runId: this.window.runId } : {}),
      },
      calls: this.calls,
      changed: this.changed,
      unchanged: this.calls - this.changed,
      skipped: { undecided: this.undecided, errorCap: this.skippedErrorCap },
      hooks: { reused: this.hooksReused, unknown: this.hooksUnknown, note: WHATIF_HOOKS_NOTE },
      byTool: [...this.byTool]
        .map(([tool, counts]) => ({ tool, ...counts }))
        .sort((a, b) => b.changed - a.changed || b.calls - a.calls || cmp(a.tool, b.tool)),
      byChange: [...this.byChange]
        .map(([key, count]) => {
          const [from, to] = key.split('>') as [Verdict, Verdict];
          return { from, to, count };
        })
        .sort((a, b) => b.count - a.count || cmp(`${a.from}>${a.to}`, `${b.from}>${b.to}`)),
      ...(this.errorCap
        ? {
            errorCap: {
              cap: this.errorCap.cap,
              ...this.capCounts,
              calls: [...this.capCalls].sort((a, b) => a.seq - b.seq),
            },
          }
        : {}),
      changes: [...this.changes].sort((a, b) => a.seq - b.seq),
      truncated: this.changed > this.changes.length,
    };
  }
}

/** Entries of a list while their JSON fits in `budget` bytes; full from the first that does not. */
class ListBudget {
  private used = 0;
  full = false;
  constructor(private readonly budget: number) {}

  fits(entry: unknown): boolean {
    if (this.full) return false;
    this.used += Buffer.byteLength(JSON.stringify(entry)) + 1;
    this.full = this.used > this.budget;
    return !this.full;
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
