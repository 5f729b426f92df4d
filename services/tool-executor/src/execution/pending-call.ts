import type {
  AgentRef,
  DecidedEvent,
  Isolation,
  ResolvedEvent,
  SuspendedEvent,
  ToolRef,
} from '@toolgate/contracts';

/** A call the executor is to run: what the allow decision (or approval) covered. */
export interface PendingCall {
  tenant: string;
  runId: string;
  dispatchId: string;
  tool: ToolRef;
  /** The post-hook input the verdict was reached on. */
  input: unknown;
  agent: AgentRef;
  isolation: Isolation;
  profile?: string;
  /** The event that authorised the run (decided or resolved). */
  causationId: string;
  /** The chain's audit facts, carried into `settled` so a reader of the outcome alone has them. */
  decidedBy: DecidedEvent['decidedBy'];
  rule?: unknown;
}

/** The executor's decision for one delivered event (pure: no I/O). */
export type ExecutorCommand =
  | { kind: 'run'; call: PendingCall }
  | { kind: 'settle-denied'; call: PendingCall; reason: string }
  | { kind: 'ignore'; why: string };

/** On `decided`: only an allow runs; deny and ask are settled or parked by the evaluator. */
export function decideOnDecided(event: DecidedEvent): ExecutorCommand {
  if (event.verdict !== 'allow') return { kind: 'ignore', why: `verdict ${event.verdict}` };
  return { kind: 'run', call: pendingCallOf(event, event.id) };
}

/**
 * On `resolved`: the approval covers exactly the call that was suspended — same input digest,
 * same approval key — and an allow runs that call, a deny settles it as denied.
 */
export function decideOnResolved(
  resolved: ResolvedEvent,
  suspended: SuspendedEvent | null,
): ExecutorCommand {
  if (!suspended) return { kind: 'ignore', why: 'no suspended call for this resolution' };
  const call = pendingCallOf(suspended, resolved.id);
  if (
    resolved.inputDigest !== suspended.inputDigest ||
    resolved.approvalKey !== suspended.approvalKey
  ) {
    return {
      kind: 'settle-denied',
      call,
      reason: 'the resolution does not match the call that was asked for',
    };
  }
  if (resolved.decision !== 'allow') {
    return {
      kind: 'settle-denied',
      call,
      reason: resolved.reason ? `approval denied: ${resolved.reason}` : 'approval denied',
    };
  }
  return { kind: 'run', call };
}

/** The call an allow decision or a suspension covers, authorised by the event `causationId`. */
function pendingCallOf(event: DecidedEvent | SuspendedEvent, causationId: string): PendingCall {
  return {
    tenant: event.tenant,
    runId: event.runId,
    dispatchId: event.dispatchId,
    tool: event.tool,
    input: event.input,
    agent: event.agent,
    isolation: event.isolation,
    ...(event.profile ? { profile: event.profile } : {}),
    causationId,
    decidedBy: event.decidedBy,
    ...(event.rule !== undefined ? { rule: event.rule } : {}),
  };
}
