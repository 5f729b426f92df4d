/**
 * What the journal knows of a dispatch that an MCP task names, from the stream (one dispatch's
 * events) or the projection (an approvals listing): enough to fold the task's status.
 */
export interface TaskFacts {
  /** When the call was journaled (`requested`). */
  createdAt: string;
  /** The latest event's time. */
  updatedAt: string;
  submittedBy: string;
  /** The approval it waits for, once `suspended`. */
  suspended?: { approvalKey: string; expiresAt: string } | undefined;
  /** How its approval was resolved, once `resolved`. */
  resolved?: { decision: 'allow' | 'deny'; by: string; reason?: string | undefined } | undefined;
  /** How it ended, once `settled`. */
  settled?: { outcome: 'ok' | 'error' | 'denied'; errorCode?: string | undefined } | undefined;
}

/** The 2025-11-25 task statuses. */
export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export interface TaskState {
  status: TaskStatus;
  statusMessage?: string;
}

/** Whether a task can change no more. */
export function isTerminal(status: TaskStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}

/**
 * A parked call that its own submitter denied was withdrawn (`tasks/cancel` resolves it so), not
 * refused by a person: its task is `cancelled`, where anyone else's deny makes it `failed`.
 */
function withdrawn(facts: TaskFacts): boolean {
  return facts.resolved?.decision === 'deny' && facts.resolved.by === facts.submittedBy;
}

/**
 * The task status of a dispatch (pure): parked and unresolved is `input_required` (a person has to
 * decide), settled ok is `completed`, settled cancelled or withdrawn is `cancelled`, any other
 * settlement (a deny, a tool error) is `failed`, everything before is `working`. A withdrawal is
 * `cancelled` as soon as it is resolved: the executor will only settle it denied.
 */
export function taskState(facts: TaskFacts): TaskState {
  const { settled, resolved, suspended } = facts;
  if (withdrawn(facts)) return { status: 'cancelled', statusMessage: 'withdrawn by the caller' };
  if (settled) {
    if (settled.outcome === 'ok') return { status: 'completed' };
    if (settled.errorCode === 'cancelled') {
      return { status: 'cancelled', statusMessage: 'cancelled while it ran' };
    }
    if (settled.outcome === 'denied') {
      return {
        status: 'failed',
        statusMessage: `denied${resolved?.reason ? `: ${resolved.reason}` : ''}`,
      };
    }
    return {
      status: 'failed',
      statusMessage: `the call ended ${settled.errorCode ?? settled.outcome}`,
    };
  }
  if (suspended && !resolved) {
    return {
      status: 'input_required',
      statusMessage: `waiting for a person's approval (approval ${suspended.approvalKey}, until ${suspended.expiresAt})`,
    };
  }
  if (resolved) {
    return { status: 'working', statusMessage: `approval resolved: ${resolved.decision}` };
  }
  return { status: 'working' };
}
