import type { DecidedBy, Verdict } from '@toolgate/contracts';
import type { DispatchState } from './dispatch-fold';

/**
 * What the projection learns about a dispatch when new events fold into it, as metrics see it:
 * the settlement, the verdict, the approval's resolution, and the time between stages — all taken
 * from the events' own times (`at`), not from when the journal happened to fold them.
 *
 * Pure: it compares a row before and after a run of its events. The projection applies each
 * stream sequence once (the audit log's key), so every fact below is measured once per dispatch,
 * whichever journal replica folds it and however often the broker redelivers. A stage pair is
 * measured when both of its ends are first known, so events folded out of order are measured
 * when the later one arrives.
 */
export type DispatchMeasurement =
  | {
      kind: 'settled';
      tenant: string;
      tool: string | null;
      outcome: 'ok' | 'error' | 'denied';
      /** The error's code; the outcome itself for `ok`. */
      code: string;
    }
  | {
      kind: 'verdict';
      tenant: string;
      tool: string | null;
      verdict: Verdict;
      decidedBy: DecidedBy;
      /** The `kind` of the rule that decided (`rule`, `protected-path`, `hook`, …), or `none`. */
      ruleKind: string;
    }
  | { kind: 'resolved'; source: 'human' | 'timeout' | 'policy'; decision: 'allow' | 'deny' }
  | { kind: 'approval-wait'; source: 'human' | 'timeout' | 'policy'; seconds: number }
  | { kind: 'hop'; hop: DispatchHop; seconds: number }
  | {
      kind: 'latency';
      /** `approval` when the call was parked for a resolution: its latency includes the wait. */
      path: 'direct' | 'approval';
      outcome: 'ok' | 'error' | 'denied';
      seconds: number;
    };

/**
 * The stages a dispatch moves through, each measured from the event that ends one to the event
 * that starts the next. `decided-started` is only measured for a call that was not parked: a parked
 * call's queue time is `resolved-started`, and its wait is the approval wait.
 */
const DISPATCH_HOPS = [
  'requested-decided',
  'decided-started',
  'resolved-started',
  'started-settled',
] as const;
export type DispatchHop = (typeof DISPATCH_HOPS)[number];

type Instant =
  'requestedAt' | 'decidedAt' | 'suspendedAt' | 'resolvedAt' | 'startedAt' | 'settledAt';

const HOP_ENDS: Readonly<Record<DispatchHop, readonly [Instant, Instant]>> = {
  'requested-decided': ['requestedAt', 'decidedAt'],
  'decided-started': ['decidedAt', 'startedAt'],
  'resolved-started': ['resolvedAt', 'startedAt'],
  'started-settled': ['startedAt', 'settledAt'],
};

/** The measurements a row's change from `before` (undefined: a new row) to `after` yields. */
export function measureDispatch(
  before: DispatchState | undefined,
  after: DispatchState,
): DispatchMeasurement[] {
  const out: DispatchMeasurement[] = [];
  const { tenant, toolName: tool } = after;
  const arrived = (field: Instant) => after[field] !== null && before?.[field] == null;
  const pairArrived = (from: Instant, to: Instant) =>
    after[from] !== null && after[to] !== null && (before?.[from] == null || before[to] == null);
  const parked = after.suspendedAt !== null || after.approvalKey !== null;

  if (arrived('decidedAt') && after.verdict && after.decidedBy) {
    out.push({
      kind: 'verdict',
      tenant,
      tool,
      verdict: after.verdict,
      decidedBy: after.decidedBy,
      ruleKind: ruleKind(after.rule),
    });
  }
  if (arrived('resolvedAt') && after.resolutionSource && after.decision) {
    out.push({ kind: 'resolved', source: after.resolutionSource, decision: after.decision });
  }
  if (pairArrived('suspendedAt', 'resolvedAt') && after.resolutionSource) {
    out.push({
      kind: 'approval-wait',
      source: after.resolutionSource,
      seconds: secondsBetween(after.suspendedAt!, after.resolvedAt!),
    });
  }
  for (const hop of DISPATCH_HOPS) {
    if (hop === 'decided-started' && parked) continue;
    const [from, to] = HOP_ENDS[hop];
    if (pairArrived(from, to))
      out.push({ kind: 'hop', hop, seconds: secondsBetween(after[from]!, after[to]!) });
  }
  if (arrived('settledAt') && after.outcome) {
    out.push({
      kind: 'settled',
      tenant,
      tool,
      outcome: after.outcome,
      code: after.error?.code ?? after.outcome,
    });
  }
  if (pairArrived('requestedAt', 'settledAt') && after.outcome) {
    out.push({
      kind: 'latency',
      path: parked ? 'approval' : 'direct',
      outcome: after.outcome,
      seconds: secondsBetween(after.requestedAt!, after.settledAt!),
    });
  }
  return out;
}

/** The decisive rule's kind, as the chain describes it (`MatchedRule.kind`). */
function ruleKind(rule: unknown): string {
  if (typeof rule !== 'object' || rule === null) return 'none';
  const kind = (rule as { kind?: unknown }).kind;
  return typeof kind === 'string' && kind ? kind : 'none';
}

/**
 * Seconds from `from` to `to`. Events are stamped by the services that publish them, on their own
 * clocks: skew between hosts can make a short hop negative, which is counted as zero.
 */
function secondsBetween(from: string, to: string): number {
  return Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);
}
