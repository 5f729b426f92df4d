import type { ApprovalView, JournalEvent, JournalEventOf } from '@toolgate/contracts';
import { laterInstant } from './dispatch-fold';

/**
 * The approval of one suspended dispatch, as a pure fold of its `suspended` and `resolved` events.
 *
 * `status` is `resolved` once any resolution is seen. The broker lets a dispatch be resolved once
 * (conditional publish), so there is no second resolution to arbitrate here. Like the dispatch
 * fold it is order-insensitive (see `dispatch-fold.ts` for why): a `resolved` redelivered ahead of
 * its `suspended` leaves the ask's fields null until the `suspended` arrives, and never reopens
 * the approval.
 */

export type ApprovalStatus = ApprovalView['status'];

/** The folded approval is exactly what the read API serves. */
export type ApprovalState = ApprovalView;

export type ApprovalEvent = JournalEventOf<'suspended' | 'resolved'>;

export function isApprovalEvent(event: JournalEvent): event is ApprovalEvent {
  return event.type === 'suspended' || event.type === 'resolved';
}

/** Folds one event into an approval. Pure. */
export function evolveApproval(
  state: ApprovalState | undefined,
  event: ApprovalEvent,
): ApprovalState {
  const base: ApprovalState = state ?? {
    tenant: event.tenant,
    runId: event.runId,
    dispatchId: event.dispatchId,
    approvalKey: event.approvalKey,
    inputDigest: event.inputDigest,
    policyRevision: event.policyRevision,
    status: 'pending',
    toolName: null,
    tool: null,
    input: undefined,
    agent: null,
    isolation: null,
    profile: null,
    decidedBy: null,
    rule: undefined,
    submittedBy: null,
    onTimeout: null,
    separationOfDuties: null,
    suspendedAt: null,
    expiresAt: null,
    decision: null,
    reason: null,
    resolvedBy: null,
    source: null,
    resolvedAt: null,
    updatedAt: event.at,
  };
  const updatedAt = laterInstant(base.updatedAt, event.at);
  if (event.type === 'suspended') {
    return {
      ...base,
      // The ask defines what is being approved; a resolution only echoes it.
      approvalKey: event.approvalKey,
      inputDigest: event.inputDigest,
      policyRevision: event.policyRevision,
      toolName: event.tool.name,
      tool: event.tool,
      input: event.input,
      agent: event.agent,
      isolation: event.isolation,
      profile: event.profile ?? null,
      decidedBy: event.decidedBy,
      rule: event.rule,
      submittedBy: event.submittedBy,
      onTimeout: event.onTimeout,
      separationOfDuties: event.separationOfDuties,
      suspendedAt: event.at,
      expiresAt: event.expiresAt,
      updatedAt,
    };
  }
  // The first resolution is the one the broker recorded once per dispatch; a later `resolved` on the
  // subject can only be a genuine one replayed (a race's refused loser, published again without the
  // expectation on an open broker): it must not rewrite who decided.
  if (base.resolvedAt !== null) return base;
  return {
    ...base,
    status: 'resolved',
    decision: event.decision,
    reason: event.reason ?? null,
    resolvedBy: event.by,
    source: event.source,
    resolvedAt: event.at,
    updatedAt,
  };
}
