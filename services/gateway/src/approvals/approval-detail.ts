import {
  DISPATCH_REPLY_BUDGET_BYTES,
  elidedValue,
  type ApprovalDetail,
  type ApprovalView,
  type DecidedEvent,
  type RequestedEvent,
  type ResolvedEvent,
  type SettledEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';
import { SHELL_TOOL_NAME, shellApprovalView } from '@toolgate/permissions';

/** A parked call's events as the journal stream holds them (the suspension is required). */
export interface ApprovalEvents {
  suspended: SuspendedEvent;
  /** The call's request: the trace it was submitted in. */
  requested?: RequestedEvent | null;
  decided?: DecidedEvent | null;
  resolved?: ResolvedEvent | null;
  settled?: SettledEvent | null;
}

/**
 * What an approver is shown of one parked call (pure): the approval as the journal's projection
 * would fold it, built here from the stream's own events so a call parked a moment ago is complete
 * before the projection catches up; the reason the chain gave, the tool's declared risk, how the
 * call ended, and for a shell call its segments with the one that asked marked.
 */
export function approvalDetail(events: ApprovalEvents): ApprovalDetail {
  const { suspended, requested, decided, resolved, settled } = events;
  const times = [suspended.at, resolved?.at, settled?.at].filter((t): t is string => !!t);
  const approval: ApprovalView = {
    tenant: suspended.tenant,
    runId: suspended.runId,
    dispatchId: suspended.dispatchId,
    approvalKey: suspended.approvalKey,
    inputDigest: suspended.inputDigest,
    policyRevision: suspended.policyRevision,
    status: resolved ? 'resolved' : 'pending',
    toolName: suspended.tool.name,
    tool: suspended.tool,
    input: suspended.input,
    agent: suspended.agent,
    isolation: suspended.isolation,
    profile: suspended.profile ?? null,
    decidedBy: suspended.decidedBy,
    rule: suspended.rule ?? null,
    submittedBy: suspended.submittedBy,
    onTimeout: suspended.onTimeout,
    separationOfDuties: suspended.separationOfDuties,
    suspendedAt: suspended.at,
    expiresAt: suspended.expiresAt,
    decision: resolved?.decision ?? null,
    reason: resolved?.reason ?? null,
    resolvedBy: resolved?.by ?? null,
    source: resolved?.source ?? null,
    resolvedAt: resolved?.at ?? null,
    updatedAt: times.reduce((a, b) => (Date.parse(b) > Date.parse(a) ? b : a)),
    settled: settled
      ? { outcome: settled.outcome, errorCode: settled.error?.code ?? null, at: settled.at }
      : null,
    traceId: requested?.traceId ?? null,
  };
  const command = (suspended.input as { command?: unknown } | null)?.command;
  return {
    approval,
    askReason: decided?.reason ?? null,
    risk: suspended.tool.risk ?? 'undeclared',
    shell:
      suspended.tool.name === SHELL_TOOL_NAME
        ? shellApprovalView(command, suspended.rule ?? null)
        : null,
    elided: [],
    shellElided: false,
  };
}

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/**
 * The detail within {@link DISPATCH_REPLY_BUDGET_BYTES}, as `dispatch.get` is: what the API's
 * `approvals.get` answers (a reply may travel over NATS, whose broker refuses a message over its
 * `max_payload`, and a parked call's input may be nearly that large). Over the budget, the input
 * stands as its preview (named in `elided`; read whole with `dispatch.value`), and if a shell
 * command's segments still do not fit, they are left out (`shellElided`). Every other field is
 * bounded by the events' schemas. The resolve-by-link page, an HTML page of its own, shows the
 * whole detail: a person approving by link sees every character of what they approve.
 */
export function boundedApprovalDetail(detail: ApprovalDetail): ApprovalDetail {
  if (bytesOf(detail) <= DISPATCH_REPLY_BUDGET_BYTES) return detail;
  const elided: ApprovalDetail = {
    ...detail,
    approval: { ...detail.approval, input: elidedValue(detail.approval.input) },
    elided: ['effectiveInput'],
  };
  if (bytesOf(elided) <= DISPATCH_REPLY_BUDGET_BYTES) return elided;
  return { ...elided, shell: null, shellElided: elided.shell !== null };
}
