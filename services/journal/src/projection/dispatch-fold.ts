import {
  DispatchStatusSchema,
  type AgentRef,
  type DecidedBy,
  type ExecutorKind,
  type Isolation,
  type JournalEvent,
  type JournalEventOf,
  type Taint,
  type ToolRef,
  type Verdict,
  type WireError,
} from '@toolgate/contracts';

/**
 * The dispatch state machine, as a pure fold over a dispatch's journal events:
 *
 *     requested → decided ─┬─ (allow) ───────────────────────────→ started → settled
 *                          ├─ (ask) → suspended → resolved ─(allow)→ started → settled
 *                          │                               └(deny)─────────→ settled (denied)
 *                          └─ (deny) ──────────────────────────────────────→ settled (denied)
 *
 * Ordering assumption: the journal's consumer gets one stream in stream order, so the events of a
 * dispatch normally arrive in the order above. They can still arrive out of order when an earlier
 * event's delivery fails and is redelivered after a later one was applied (ack-wait expiry, a nak,
 * or two replicas sharing the consumer). The fold is therefore written to be order-insensitive:
 * each event type contributes its own fields, fields copied into several events (tool, agent,
 * input) keep the first value seen (they are equal by construction: they are part of the
 * dispatch's content key), `status` is the furthest stage reached (it never moves backwards), and
 * repeated `started` attempts keep the highest. Folding the same events in any order yields the
 * same state, which is what lets a rebuild from the stream equal the live projection.
 *
 * The fold never rejects an event: the broker already enforces once-per-dispatch transitions, and
 * the projection records what the journal says happened, not what should have.
 */

/** The contracts' one list of them (`DispatchStatusSchema`), in fold order. */
export const DISPATCH_STATUSES = DispatchStatusSchema.options;
export type DispatchStatus = (typeof DISPATCH_STATUSES)[number];

/** The folded state of one dispatch. Fields an event has not supplied yet are null. */
export interface DispatchState {
  tenant: string;
  runId: string;
  dispatchId: string;
  status: DispatchStatus;
  callId: string | null;
  toolName: string | null;
  tool: ToolRef | null;
  /** The caller's input as requested. */
  input: unknown;
  /** The post-hook input the verdict was reached on (what `execute` receives). */
  effectiveInput: unknown;
  agent: AgentRef | null;
  isolation: Isolation | null;
  profile: string | null;
  taint: Taint | null;
  submittedBy: string | null;
  retryOf: string | null;
  retryDepth: number | null;
  /** The W3C trace the call was submitted in (`requested.traceId`), for a trace UI link. */
  traceId: string | null;
  verdict: Verdict | null;
  decidedBy: DecidedBy | null;
  rule: unknown;
  reason: string | null;
  policyRevision: number | null;
  inputDigest: string | null;
  approvalKey: string | null;
  expiresAt: string | null;
  decision: 'allow' | 'deny' | null;
  resolvedBy: string | null;
  resolutionSource: 'human' | 'timeout' | 'policy' | null;
  resolutionReason: string | null;
  attempt: number | null;
  executor: ExecutorKind | null;
  cwd: string | null;
  outcome: 'ok' | 'error' | 'denied' | null;
  result: unknown;
  error: WireError | null;
  durationMs: number | null;
  requestedAt: string | null;
  decidedAt: string | null;
  suspendedAt: string | null;
  resolvedAt: string | null;
  startedAt: string | null;
  settledAt: string | null;
  /** The latest `at` among the folded events. */
  updatedAt: string;
}

/** The journal events that belong to a dispatch (the rest describe worktrees). */
export type DispatchEvent = JournalEventOf<
  'requested' | 'decided' | 'suspended' | 'resolved' | 'started' | 'settled'
>;

const DISPATCH_EVENT_TYPES: ReadonlySet<JournalEvent['type']> = new Set(DISPATCH_STATUSES);

export function isDispatchEvent(event: JournalEvent): event is DispatchEvent {
  return DISPATCH_EVENT_TYPES.has(event.type);
}

const rank = (status: DispatchStatus): number => DISPATCH_STATUSES.indexOf(status);

/** The further of two stages. */
function furthestStatus(a: DispatchStatus, b: DispatchStatus): DispatchStatus {
  return rank(a) >= rank(b) ? a : b;
}

/** The later of two ISO instants (by time, not by string: offsets may differ). */
export function laterInstant(a: string, b: string): string {
  return Date.parse(b) > Date.parse(a) ? b : a;
}

/** A dispatch's state before any event: the envelope only. */
function initialDispatchState(event: DispatchEvent): DispatchState {
  return {
    tenant: event.tenant,
    runId: event.runId,
    dispatchId: event.dispatchId,
    status: event.type,
    callId: null,
    toolName: null,
    tool: null,
    input: undefined,
    effectiveInput: undefined,
    agent: null,
    isolation: null,
    profile: null,
    taint: null,
    submittedBy: null,
    retryOf: null,
    retryDepth: null,
    traceId: null,
    verdict: null,
    decidedBy: null,
    rule: undefined,
    reason: null,
    policyRevision: null,
    inputDigest: null,
    approvalKey: null,
    expiresAt: null,
    decision: null,
    resolvedBy: null,
    resolutionSource: null,
    resolutionReason: null,
    attempt: null,
    executor: null,
    cwd: null,
    outcome: null,
    result: undefined,
    error: null,
    durationMs: null,
    requestedAt: null,
    decidedAt: null,
    suspendedAt: null,
    resolvedAt: null,
    startedAt: null,
    settledAt: null,
    updatedAt: event.at,
  };
}

/** Folds one event into a dispatch's state. Pure: no clock, no I/O, the input is not mutated. */
export function evolveDispatch(
  state: DispatchState | undefined,
  event: DispatchEvent,
): DispatchState {
  const base = state ?? initialDispatchState(event);
  const next: DispatchState = {
    ...base,
    status: furthestStatus(base.status, event.type),
    updatedAt: laterInstant(base.updatedAt, event.at),
  };
  switch (event.type) {
    case 'requested':
      return {
        ...next,
        ...firstSeenCall(next, event),
        callId: event.callId,
        tool: event.tool,
        input: event.input,
        taint: event.taint ?? null,
        submittedBy: event.submittedBy,
        retryOf: event.retryOf ?? null,
        retryDepth: event.retryDepth,
        traceId: event.traceId ?? null,
        requestedAt: event.at,
      };
    case 'decided':
      return {
        ...next,
        ...firstSeenCall(next, event),
        // The requested ToolRef wins: it is what the caller's dispatch key was computed over.
        tool: next.tool ?? event.tool,
        effectiveInput: event.input,
        verdict: event.verdict,
        decidedBy: event.decidedBy,
        rule: event.rule,
        reason: event.reason ?? null,
        policyRevision: event.policyRevision,
        inputDigest: event.inputDigest,
        decidedAt: event.at,
      };
    case 'suspended':
      return {
        ...next,
        ...firstSeenCall(next, event),
        tool: next.tool ?? event.tool,
        effectiveInput: next.effectiveInput ?? event.input,
        submittedBy: next.submittedBy ?? event.submittedBy,
        decidedBy: next.decidedBy ?? event.decidedBy,
        rule: next.rule ?? event.rule,
        policyRevision: next.policyRevision ?? event.policyRevision,
        inputDigest: next.inputDigest ?? event.inputDigest,
        approvalKey: event.approvalKey,
        expiresAt: event.expiresAt,
        suspendedAt: event.at,
      };
    case 'resolved':
      // The first is the recorded one (see the approval fold): a replay does not rewrite it.
      if (next.resolvedAt !== null) return next;
      return {
        ...next,
        approvalKey: next.approvalKey ?? event.approvalKey,
        decision: event.decision,
        resolvedBy: event.by,
        resolutionSource: event.source,
        resolutionReason: event.reason ?? null,
        resolvedAt: event.at,
      };
    case 'started': {
      // One `started` per attempt: the projection shows the latest attempt.
      if (next.attempt !== null && next.attempt > event.attempt) return next;
      return {
        ...next,
        toolName: next.toolName ?? event.toolName,
        attempt: event.attempt,
        executor: event.executor,
        cwd: event.cwd ?? null,
        startedAt: event.at,
      };
    }
    case 'settled':
      return {
        ...next,
        toolName: next.toolName ?? event.toolName,
        outcome: event.outcome,
        result: event.result,
        error: event.error ?? null,
        durationMs: event.durationMs,
        // A denial settles without an attempt (attempt 0); it must not hide a started attempt.
        attempt: Math.max(next.attempt ?? 0, event.attempt),
        verdict: next.verdict ?? event.verdict ?? null,
        decidedBy: next.decidedBy ?? event.decidedBy ?? null,
        rule: next.rule ?? event.rule,
        settledAt: event.at,
      };
  }
}

/**
 * The call's description that `requested`, `decided` and `suspended` each carry. The copies are
 * equal by construction (they are part of the dispatch's content key): the first one seen stays.
 */
function firstSeenCall(
  state: DispatchState,
  event: JournalEventOf<'requested' | 'decided' | 'suspended'>,
): Pick<DispatchState, 'toolName' | 'agent' | 'isolation' | 'profile'> {
  return {
    toolName: state.toolName ?? event.tool.name,
    agent: state.agent ?? event.agent,
    isolation: state.isolation ?? event.isolation,
    profile: state.profile ?? event.profile ?? null,
  };
}

/** Folds a dispatch's events from nothing. */
export function foldDispatch(events: readonly DispatchEvent[]): DispatchState | undefined {
  return events.reduce<DispatchState | undefined>(evolveDispatch, undefined);
}
