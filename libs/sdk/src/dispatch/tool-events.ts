import type { JournalEvent, Risk, SettledEvent } from '@toolgate/contracts';

/**
 * The events a dispatch handle emits. `tool:start` and `tool:end` have exactly the shapes of the
 * reference telemetry (`ToolEvents` in 003), so existing consumers of those events read ours
 * unchanged; `approval:pending` is what a host needs to ask someone (reference 000, "Ask approvals
 * surface to the host").
 */
export interface ToolStartEvent {
  type: 'tool:start';
  toolName: string;
  /** The caller's callId: pairs start and end exactly among concurrent same-name calls. */
  toolCallId?: string;
  risk?: Risk;
}

export interface ToolEndEvent {
  type: 'tool:end';
  toolName: string;
  toolCallId?: string;
  outcome: 'ok' | 'error' | 'denied';
  durationMs: number;
  /** The structured failure reason, on outcome `error` only. */
  errorCode?: string;
  verdict?: 'allow' | 'deny' | 'ask';
  decidedBy?: string;
  rule?: unknown;
}

export interface ApprovalPendingEvent {
  type: 'approval:pending';
  /** The approval key to resolve (sha256 of tool name + canonical post-hook input). */
  key: string;
  dispatchId: string;
  toolName: string;
  /** The post-hook input the approval covers: exactly what the tool would receive. */
  input: unknown;
  rule?: unknown;
  expiresAt: string;
  /** What happens if nobody decides before `expiresAt`. */
  onTimeout: 'allow' | 'deny';
}

export interface DispatchEvents {
  'tool:start': ToolStartEvent;
  'tool:end': ToolEndEvent;
  'approval:pending': ApprovalPendingEvent;
}
export type DispatchEventName = keyof DispatchEvents;
export type DispatchEvent = DispatchEvents[DispatchEventName];

/** What the handle knows about its call that the journal event alone may not carry. */
export interface CallFacts {
  callId: string;
  risk?: Risk;
  /**
   * The verdict from the dispatch's `decided` event. The executor's `settled` does not repeat it
   * for calls it ran, so the handle carries it over to complete `tool:end`'s audit fields.
   */
  decision?: { verdict: 'allow' | 'deny' | 'ask'; decidedBy: string; rule?: unknown };
}

/**
 * Maps one journal event of the dispatch to the handle event it surfaces as, or undefined when it
 * surfaces as none (`requested`, `decided`, `resolved`). Pure.
 */
export function toDispatchEvent(event: JournalEvent, call: CallFacts): DispatchEvent | undefined {
  switch (event.type) {
    case 'started':
      return {
        type: 'tool:start',
        toolName: event.toolName,
        toolCallId: call.callId,
        ...(call.risk ? { risk: call.risk } : {}),
      };
    case 'settled':
      return {
        type: 'tool:end',
        toolName: event.toolName,
        toolCallId: call.callId,
        outcome: event.outcome,
        durationMs: event.durationMs,
        ...(event.outcome === 'error' && event.error ? { errorCode: event.error.code } : {}),
        ...auditFields(event, call.decision),
      };
    case 'suspended':
      return {
        type: 'approval:pending',
        key: event.approvalKey,
        dispatchId: event.dispatchId,
        toolName: event.tool.name,
        input: event.input,
        ...(event.rule !== undefined ? { rule: event.rule } : {}),
        expiresAt: event.expiresAt,
        onTimeout: event.onTimeout,
      };
    default:
      return undefined;
  }
}

/** The settled event's own audit fields, completed from the `decided` verdict where it has none. */
function auditFields(
  event: SettledEvent,
  decision: CallFacts['decision'],
): Pick<ToolEndEvent, 'verdict' | 'decidedBy' | 'rule'> {
  const verdict = event.verdict ?? decision?.verdict;
  const decidedBy = event.decidedBy ?? decision?.decidedBy;
  const rule = event.rule !== undefined ? event.rule : decision?.rule;
  return {
    ...(verdict ? { verdict } : {}),
    ...(decidedBy ? { decidedBy } : {}),
    ...(rule !== undefined ? { rule } : {}),
  };
}
