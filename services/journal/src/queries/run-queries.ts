import { LIST_ITEM_MAX_BYTES, PageLimit, fitPage, type InputPreview } from '@toolgate/contracts';
import { sql } from 'kysely';
import { inSnapshot, type Db } from '../db/database';
import { errorCodeOf, fromJsonb, toIso } from '../db/jsonb';
import type { DispatchStatus } from '../projection/dispatch-fold';
import { runStatus, type RunStatus } from '../projection/run-status';
import { inputPreviewColumns, inputPreviewOf } from './input-preview';
import { decodeCursor, encodeCursor, SORT_KEY_LAST } from './list-cursor';

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
  /** The W3C trace it was submitted in, for a trace UI link; null without one. */
  traceId: string | null;
}

/** An open approval of a run: what a person needs to decide it (the input as a preview). */
export interface PendingApproval {
  key: string;
  dispatchId: string;
  tool: string | null;
  inputPreview: InputPreview;
  rule: unknown;
  since: string | null;
  expires: string | null;
}

/** How many of a run's pending approvals its view lists; the approvals list pages through all. */
export const RUN_PENDING_LISTED = 20;

export interface RunView {
  tenant: string;
  runId: string;
  status: RunStatus;
  /** One page of the run's dispatches, in request order. */
  dispatches: RunDispatchSummary[];
  /** The next page of dispatches (`run.get` with `cursor`), or null. */
  nextCursor: string | null;
  /** How many dispatches the run has in all. */
  dispatchCount: number;
  /** The oldest of the run's open approvals (`pendingCount` in all: list them by run). */
  pending: PendingApproval[];
  pendingCount: number;
  firstAt: string | null;
  lastAt: string | null;
}

/** Which page of a run's dispatches. */
export interface RunPage {
  cursor?: string | undefined;
  /** `PageLimit.runDispatches`; the page also ends at the reply budget. */
  limit?: number | undefined;
}

/**
 * A run of one tenant: its derived status (over all its dispatches), one page of its dispatches
 * and its oldest open approvals; undefined when the journal has nothing of it (for this tenant).
 */
export function getRun(
  db: Db,
  tenant: string,
  runId: string,
  page: RunPage = {},
): Promise<RunView | undefined> {
  // One snapshot for the reads: the projection commits a dispatch's row and its approval
  // together, and a run read across two commits could say `suspended` with nothing pending.
  return inSnapshot(db, (trx) => readRun(trx, tenant, runId, page));
}

const REQUESTED_KEY = sql<string>`coalesce((extract(epoch from requested_at) * 1000000)::bigint, ${SORT_KEY_LAST}::bigint)`;

async function readRun(
  db: Db,
  tenant: string,
  runId: string,
  page: RunPage,
): Promise<RunView | undefined> {
  const limit = Math.min(
    Math.max(page.limit ?? PageLimit.runDispatches.default, 1),
    PageLimit.runDispatches.max,
  );
  const run = await db
    .selectFrom('runs')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .executeTakeFirst();
  const statuses = await db
    .selectFrom('dispatches')
    .select(['status', (eb) => eb.fn.countAll<string>().as('n')])
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .groupBy('status')
    .execute();
  const dispatchCount = statuses.reduce((sum, s) => sum + Number(s.n), 0);
  // A run the journal has nothing of (a mistyped or foreign id, the common lookup that fails)
  // needs none of the reads below.
  if (!run && dispatchCount === 0) return undefined;
  let dispatchQuery = db
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
      'trace_id',
      REQUESTED_KEY.as('sort_key'),
    ])
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId);
  if (page.cursor !== undefined) {
    const after = decodeCursor(page.cursor, 'requested');
    dispatchQuery = dispatchQuery.where(
      sql<boolean>`(${REQUESTED_KEY}, dispatch_id) > (${after.key}::bigint, ${after.id})`,
    );
  }
  const rows = await dispatchQuery
    .orderBy(REQUESTED_KEY, 'asc')
    .orderBy('dispatch_id', 'asc')
    .limit(limit + 1)
    .execute();
  const approvals = await db
    .selectFrom('approvals')
    .select([
      'approval_key',
      'dispatch_id',
      'tool_name',
      'rule',
      'suspended_at',
      'expires_at',
      ...inputPreviewColumns,
    ])
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .where('status', '=', 'pending')
    .orderBy('suspended_at')
    .orderBy('dispatch_id')
    .limit(RUN_PENDING_LISTED)
    .execute();
  const { n: pendingCount } = await db
    .selectFrom('approvals')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('tenant', '=', tenant)
    .where('run_id', '=', runId)
    .where('status', '=', 'pending')
    .executeTakeFirstOrThrow();
  const dispatches = rows.slice(0, limit);
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
    traceId: d.trace_id,
  }));
  const fit = fitPage(summaries);
  const last = dispatches[fit - 1];
  return {
    tenant,
    runId,
    status: runStatus(statuses.map((s) => s.status as DispatchStatus)),
    dispatches: summaries.slice(0, fit),
    nextCursor:
      (fit < summaries.length || rows.length > limit) && last
        ? encodeCursor('requested', last.sort_key, last.dispatch_id)
        : null,
    dispatchCount,
    pending: approvals.map((a) => ({
      key: a.approval_key,
      dispatchId: a.dispatch_id,
      tool: a.tool_name,
      inputPreview: inputPreviewOf(a),
      rule: boundedRule(fromJsonb(a.rule)),
      since: toIso(a.suspended_at),
      expires: toIso(a.expires_at),
    })),
    pendingCount: Number(pendingCount),
    firstAt: run ? toIso(run.first_at) : null,
    lastAt: run ? toIso(run.last_at) : null,
  };
}

/** A rule as a run view lists it: a marker in place of one too large to list. */
function boundedRule(rule: unknown): unknown {
  const bytes = new TextEncoder().encode(JSON.stringify(rule ?? null)).length;
  return bytes <= LIST_ITEM_MAX_BYTES / 2 ? rule : { kind: 'too-large', bytes };
}
