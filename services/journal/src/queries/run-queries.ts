import { inSnapshot, type Db } from '../db/database';
import { errorCodeOf, toIso } from '../db/jsonb';
import type { DispatchStatus } from '../projection/dispatch-fold';
import { runStatus, type RunStatus } from '../projection/run-status';
import { approvalFromRow } from '../projection/projection-repository';

/** One dispatch of a run, summarised. */
export interface RunDispatchSummary {
  dispatchId: string;
  callId: string | null;
  toolName: string | null;
  status: DispatchStatus;
  verdict: string | null;
  /** What decided the verdict (a deny rule, the default, ...). */
  decidedBy: string | null;
  /** An approval's resolution and who gave it, for a call that was asked about. */
  decision: string | null;
  resolvedBy: string | null;
  outcome: string | null;
  /** The error's code when the call settled with an error or was denied. */
  errorCode: string | null;
  approvalKey: string | null;
  requestedAt: string | null;
  settledAt: string | null;
}

/** An open approval of a run: what a person needs to decide it. */
export interface PendingApproval {
  key: string;
  dispatchId: string;
  tool: string | null;
  input: unknown;
  rule: unknown;
  since: string | null;
  expires: string | null;
}

export interface RunView {
  tenant: string;
  runId: string;
  status: RunStatus;
  dispatches: RunDispatchSummary[];
  pending: PendingApproval[];
  firstAt: string | null;
  lastAt: string | null;
}

/**
 * A run of one tenant: its derived status, its dispatches and its open approvals; undefined when
 * the journal has nothing of it (for this tenant).
 */
export function getRun(db: Db, tenant: string, runId: string): Promise<RunView | undefined> {
  // One snapshot for the three reads: the projection commits a dispatch's row and its approval
  // together, and a run read across two commits could say `suspended` with nothing pending.
  return inSnapshot(db, (trx) => readRun(trx, tenant, runId));
}

async function readRun(db: Db, tenant: string, runId: string): Promise<RunView | undefined> {
  const run = await db
    .selectFrom('runs')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .executeTakeFirst();
  const dispatches = await db
    .selectFrom('dispatches')
    .select([
      'dispatch_id',
      'call_id',
      'tool_name',
      'status',
      'verdict',
      'decided_by',
      'decision',
      'resolved_by',
      'outcome',
      'error',
      'approval_key',
      'requested_at',
      'settled_at',
    ])
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .orderBy('requested_at', 'asc')
    .orderBy('dispatch_id')
    .execute();
  const approvals = await db
    .selectFrom('approvals')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .where('status', '=', 'pending')
    .orderBy('suspended_at')
    .orderBy('dispatch_id')
    .execute();
  if (!run && dispatches.length === 0) return undefined;
  const summaries: RunDispatchSummary[] = dispatches.map((d) => ({
    dispatchId: d.dispatch_id,
    callId: d.call_id,
    toolName: d.tool_name,
    status: d.status as DispatchStatus,
    verdict: d.verdict,
    decidedBy: d.decided_by,
    decision: d.decision,
    resolvedBy: d.resolved_by,
    outcome: d.outcome,
    errorCode: errorCodeOf(d.error),
    approvalKey: d.approval_key,
    requestedAt: toIso(d.requested_at),
    settledAt: toIso(d.settled_at),
  }));
  return {
    tenant,
    runId,
    status: runStatus(summaries.map((d) => d.status)),
    dispatches: summaries,
    pending: approvals.map(approvalFromRow).map((a) => ({
      key: a.approvalKey,
      dispatchId: a.dispatchId,
      tool: a.toolName,
      input: a.input,
      rule: a.rule,
      since: a.suspendedAt,
      expires: a.expiresAt,
    })),
    firstAt: run ? toIso(run.first_at) : null,
    lastAt: run ? toIso(run.last_at) : null,
  };
}
