import {
  approvalKey,
  canonicalJson,
  inputDigest,
  type DecidedEvent,
  type RequestedEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';

/**
 * What the executor checks before it runs an allowed call (pure: the journal's facts come in).
 *
 * NATS is shared: any client a subject permission lets through can publish a `decided` or a
 * `suspended`. So the executor runs only a decision that agrees with the dispatch as the gateway
 * recorded it — same tool reference (name, contract hash, executor, risk, timeout), same agent,
 * isolation and profile — whose input digest is the digest of the input it is about to run, and
 * whose policy revision existed for the tenant when the decision was recorded. Anything else is
 * refused: the runner settles the dispatch as denied and counts the refusal.
 */

/** Why a decision was refused (a metric label and the settled error's `details.refused`). */
export type Refusal =
  /**
   * The event arrived on a subject other than the one its own fields name (checked by the runner
   * before anything else: such an event is dropped, the dispatch it names is not touched).
   */
  | 'subject'
  /** No `requested` is recorded for the dispatch. */
  | 'no-request'
  /** The tool reference differs from the requested one (name, contract hash, executor, …). */
  | 'tool'
  /** The agent, isolation or profile differs from the requested call's. */
  | 'call'
  /** `inputDigest` is not the digest of the input the decision would run. */
  | 'input-digest'
  /** The approval key is not the one of the tool name and input the suspension would run. */
  | 'approval-key'
  /** The policy revision did not exist for the tenant when the decision was recorded. */
  | 'policy-revision';

export const REFUSALS: readonly Refusal[] = [
  'subject',
  'no-request',
  'tool',
  'call',
  'input-digest',
  'approval-key',
  'policy-revision',
];

/** The facts a check needs, read from the journal and the policy bucket by the runner. */
export interface DecisionFacts {
  /** The dispatch's recorded `requested`, or null. */
  requested: RequestedEvent | null;
  /** Whether the decision's policy revision existed when it was recorded (see `revisionExisted`). */
  revisionExisted: boolean;
}

/** A `decided` allow, checked against the recorded request. Null: it may run. */
export function checkDecided(decided: DecidedEvent, facts: DecisionFacts): Refusal | null {
  return checkDecision(decided, facts);
}

/**
 * The `suspended` a resolution would run, checked against the recorded request (its match with the
 * resolution itself is `decideOnResolved`'s). Null: it may run.
 */
export function checkSuspended(suspended: SuspendedEvent, facts: DecisionFacts): Refusal | null {
  const refusal = checkDecision(suspended, facts);
  if (refusal) return refusal;
  if (suspended.approvalKey !== approvalKey(suspended.tool.name, suspended.input))
    return 'approval-key';
  return null;
}

function checkDecision(
  decision: DecidedEvent | SuspendedEvent,
  facts: DecisionFacts,
): Refusal | null {
  const requested = facts.requested;
  if (
    !requested ||
    requested.tenant !== decision.tenant ||
    requested.runId !== decision.runId ||
    requested.dispatchId !== decision.dispatchId
  )
    return 'no-request';
  if (canonicalJson(requested.tool) !== canonicalJson(decision.tool)) return 'tool';
  if (
    canonicalJson(requested.agent) !== canonicalJson(decision.agent) ||
    canonicalJson(requested.isolation) !== canonicalJson(decision.isolation) ||
    (requested.profile ?? null) !== (decision.profile ?? null)
  )
    return 'call';
  // The post-hook input may differ from the requested one; what must hold is that the digest the
  // verdict names is the digest of the input that would run.
  if (inputDigest(decision.input) !== decision.inputDigest) return 'input-digest';
  if (!facts.revisionExisted) return 'policy-revision';
  return null;
}

/**
 * A tenant's policy history as the policy bucket retains it (a JetStream KV: a revision is the
 * stream sequence its value was written at, and only the last few values per tenant are kept).
 */
export interface PolicyHistory {
  /**
   * What the bucket holds at sequence `revision` (for a revision > 0): whether it is this tenant's
   * policy, whether it is a value (not a delete), and when it was stored; null when nothing is
   * retained there.
   */
  atRevision: { ownTenant: boolean; isValue: boolean; storedAtMs: number } | null;
  /** The tenant's oldest retained entry, or null when none is retained. */
  oldest: { revision: number; storedAtMs: number } | null;
  /** The tenant's newest entry, or null when none is retained. */
  newest: { revision: number; isValue: boolean; storedAtMs: number } | null;
}

/**
 * Whether `revision` could have been the tenant's policy when a decision was recorded at
 * `decidedAtMs` (broker clock). `toleranceMs` covers the evaluator's mirror of the bucket lagging
 * the bucket, and the two clocks.
 *
 * - Revision n > 0: the bucket holds the tenant's value at n, stored before the decision; or n is
 *   older than every retained entry of the tenant (superseded beyond the bucket's history, which
 *   cannot be told apart from never written — the one case this check lets through unproven).
 * - Revision 0 (no policy): the tenant had no policy then — nothing retained, its newest entry is a
 *   delete stored before the decision, or its oldest retained entry came after the decision.
 */
export function revisionExisted(
  revision: number,
  decidedAtMs: number,
  history: PolicyHistory,
  toleranceMs: number,
): boolean {
  if (revision === 0) {
    const { oldest, newest } = history;
    if (!oldest || !newest) return true;
    if (!newest.isValue && newest.storedAtMs <= decidedAtMs + toleranceMs) return true;
    return oldest.storedAtMs > decidedAtMs - toleranceMs;
  }
  const at = history.atRevision;
  if (at) return at.ownTenant && at.isValue && at.storedAtMs <= decidedAtMs + toleranceMs;
  return history.oldest !== null && history.oldest.revision > revision;
}
