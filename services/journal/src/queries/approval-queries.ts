import {
  PageLimit,
  LIST_ITEM_MAX_BYTES,
  fitPage,
  type ApprovalListItem,
  type ApprovalOutcome,
  type ApprovalView,
  type ListApprovalsResponse,
} from '@toolgate/contracts';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/database';
import { errorCodeOf, toIso } from '../db/jsonb';
import type { ApprovalStatus } from '../projection/approval-fold';
import { approvalFromRow } from '../projection/projection-repository';
import { inputPreviewColumns, inputPreviewOf } from './input-preview';
import { decodeCursor, encodeCursor, SORT_KEY_FIRST, SORT_KEY_LAST } from './list-cursor';

/** What the approvals listing filters on. The tenant is not optional. */
export interface ApprovalFilter {
  tenant: string;
  runId?: string;
  /** Tool name. */
  tool?: string;
  /** Approval key: identical calls share one. */
  key?: string;
  /** Only approvals suspended at least this long before `now`. */
  minAgeMs?: number;
  /** Default `pending`. */
  status?: ApprovalStatus | 'all';
  /** `oldest` suspension first (default), or `newest` activity (resolution, else suspension) first. */
  order?: 'oldest' | 'newest';
  /** Who resolved it. */
  resolvedBy?: string;
  decision?: 'allow' | 'deny';
  /** How the call ended. */
  outcome?: 'ok' | 'error' | 'denied';
  /** Latest activity at or after / before (ISO instants). */
  since?: string;
  until?: string;
  /** Default 100, at most 1000 per page; a page also ends at the reply budget. */
  limit?: number;
  /** The previous page's `nextCursor`. */
  cursor?: string;
}

/**
 * The sort key of each order as microseconds since the epoch (a bigint, exact and comparable with
 * the cursor's); an approval without the instant sorts last either way.
 */
function sortKey(order: 'oldest' | 'newest'): RawBuilder<string> {
  return order === 'newest'
    ? sql<string>`coalesce((extract(epoch from coalesce(approvals.resolved_at, approvals.suspended_at)) * 1000000)::bigint, ${SORT_KEY_FIRST}::bigint)`
    : sql<string>`coalesce((extract(epoch from approvals.suspended_at) * 1000000)::bigint, ${SORT_KEY_LAST}::bigint)`;
}

/**
 * One page of a tenant's approvals, each with how its call ended once it settled (`settled`) and a
 * bounded preview of its input (computed in the database: a listing never loads whole inputs),
 * oldest suspension first or newest activity first. The page holds at most `limit` approvals and
 * stops where its JSON would pass the reply budget; `nextCursor` continues it. `now` comes from the
 * caller (no clock here).
 */
export async function listApprovals(
  db: Db,
  filter: ApprovalFilter,
  now: Date,
): Promise<ListApprovalsResponse> {
  const status = filter.status ?? 'pending';
  const order = filter.order ?? 'oldest';
  const limit = Math.min(
    Math.max(filter.limit ?? PageLimit.approvals.default, 1),
    PageLimit.approvals.max,
  );
  const key = sortKey(order);
  let query = db
    .selectFrom('approvals')
    .leftJoin('dispatches', (join) =>
      join
        .onRef('dispatches.tenant', '=', 'approvals.tenant')
        .onRef('dispatches.dispatch_id', '=', 'approvals.dispatch_id'),
    )
    .select([
      'approvals.tenant',
      'approvals.dispatch_id',
      'approvals.run_id',
      'approvals.approval_key',
      'approvals.input_digest',
      'approvals.policy_revision',
      'approvals.status',
      'approvals.tool_name',
      'approvals.tool',
      'approvals.agent',
      'approvals.isolation',
      'approvals.profile',
      'approvals.decided_by',
      'approvals.rule',
      'approvals.submitted_by',
      'approvals.on_timeout',
      'approvals.separation_of_duties',
      'approvals.suspended_at',
      'approvals.expires_at',
      'approvals.decision',
      'approvals.reason',
      'approvals.resolved_by',
      'approvals.source',
      'approvals.resolved_at',
      'approvals.updated_at',
      'approvals.last_seq',
      'dispatches.outcome as call_outcome',
      'dispatches.error as call_error',
      'dispatches.settled_at as call_settled_at',
      'dispatches.trace_id as call_trace_id',
      key.as('sort_key'),
      ...inputPreviewColumns,
    ])
    .where('approvals.tenant', '=', filter.tenant);
  if (status !== 'all') query = query.where('approvals.status', '=', status);
  if (filter.runId !== undefined) query = query.where('approvals.run_id', '=', filter.runId);
  if (filter.tool !== undefined) query = query.where('approvals.tool_name', '=', filter.tool);
  if (filter.key !== undefined) query = query.where('approvals.approval_key', '=', filter.key);
  if (filter.resolvedBy !== undefined)
    query = query.where('approvals.resolved_by', '=', filter.resolvedBy);
  if (filter.decision !== undefined)
    query = query.where('approvals.decision', '=', filter.decision);
  if (filter.outcome !== undefined) query = query.where('dispatches.outcome', '=', filter.outcome);
  if (filter.minAgeMs !== undefined) {
    query = query.where('approvals.suspended_at', '<=', new Date(now.getTime() - filter.minAgeMs));
  }
  const activity = sql`coalesce(approvals.resolved_at, approvals.suspended_at)`;
  if (filter.since !== undefined)
    query = query.where(sql<boolean>`${activity} >= ${new Date(filter.since)}`);
  if (filter.until !== undefined)
    query = query.where(sql<boolean>`${activity} < ${new Date(filter.until)}`);
  if (filter.cursor !== undefined) {
    const after = decodeCursor(filter.cursor, order);
    query = query.where(
      order === 'newest'
        ? sql<boolean>`(${key}, approvals.dispatch_id) < (${after.key}::bigint, ${after.id})`
        : sql<boolean>`(${key}, approvals.dispatch_id) > (${after.key}::bigint, ${after.id})`,
    );
  }
  query =
    order === 'newest'
      ? query.orderBy(key, 'desc').orderBy('approvals.dispatch_id', 'desc')
      : query.orderBy(key, 'asc').orderBy('approvals.dispatch_id', 'asc');
  const rows = await query.limit(limit + 1).execute();
  const items = rows
    .slice(0, limit)
    .map(
      ({
        call_outcome,
        call_error,
        call_settled_at,
        call_trace_id,
        sort_key: _key,
        input_head,
        input_bytes,
        input_summary,
        ...row
      }): ApprovalListItem => {
        const { input: _input, ...view }: ApprovalView = approvalFromRow({ ...row, input: null });
        return boundedItem({
          ...view,
          inputPreview: inputPreviewOf({ input_head, input_bytes, input_summary }),
          traceId: call_trace_id,
          settled:
            call_outcome === null || call_settled_at === null
              ? null
              : {
                  outcome: call_outcome as ApprovalOutcome['outcome'],
                  errorCode: errorCodeOf(call_error),
                  at: toIso(call_settled_at),
                },
        });
      },
    );
  const fit = fitPage(items);
  const more = fit < items.length || rows.length > limit;
  const last = rows[fit - 1];
  return {
    approvals: items.slice(0, fit),
    nextCursor: more && last ? encodeCursor(order, last.sort_key, last.dispatch_id) : null,
  };
}

/**
 * An item within {@link LIST_ITEM_MAX_BYTES}: the only fields a tenant can make large once the
 * input is a preview are the rule (a policy's, as large as the policy allows) and the reason.
 */
function boundedItem(item: ApprovalListItem): ApprovalListItem {
  const size = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).length;
  if (size(item) <= LIST_ITEM_MAX_BYTES) return item;
  const rule = { kind: 'too-large', bytes: size(item.rule) };
  const bounded = { ...item, rule };
  if (size(bounded) <= LIST_ITEM_MAX_BYTES) return bounded;
  return { ...bounded, reason: item.reason === null ? null : item.reason.slice(0, 2048) };
}

/**
 * The approval a key names, for one tenant. Identical calls (same tool and post-hook input) share
 * a key, so several dispatches can carry it: the oldest pending one is returned, or when none is
 * pending the most recently resolved one.
 */
export async function getApproval(
  db: Db,
  tenant: string,
  approvalKey: string,
): Promise<ApprovalView | undefined> {
  const row = await db
    .selectFrom('approvals')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('approval_key', '=', approvalKey)
    .orderBy(sql`case when status = 'pending' then 0 else 1 end`)
    .orderBy(sql`case when status = 'pending' then suspended_at end asc nulls last`)
    .orderBy('resolved_at', 'desc')
    .orderBy('dispatch_id')
    .executeTakeFirst();
  return row && withTraceId(db, approvalFromRow(row));
}

/** An approval with its dispatch's trace (`traceId`, null when it was requested without one). */
async function withTraceId(db: Db, approval: ApprovalView): Promise<ApprovalView> {
  const dispatch = await db
    .selectFrom('dispatches')
    .select('trace_id')
    .where('tenant', '=', approval.tenant)
    .where('dispatch_id', '=', approval.dispatchId)
    .executeTakeFirst();
  return { ...approval, traceId: dispatch?.trace_id ?? null };
}

/** The approval of one dispatch of one tenant. */
export async function getApprovalForDispatch(
  db: Db,
  tenant: string,
  dispatchId: string,
): Promise<ApprovalView | undefined> {
  const row = await db
    .selectFrom('approvals')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('dispatch_id', '=', dispatchId)
    .executeTakeFirst();
  return row && withTraceId(db, approvalFromRow(row));
}

/** What the timeout sweeper needs to publish a `resolved` on an expired approval's behalf. */
export interface DueApproval {
  tenant: string;
  runId: string;
  dispatchId: string;
  approvalKey: string;
  inputDigest: string;
  policyRevision: number;
  toolName: string | null;
  onTimeout: 'allow' | 'deny';
  expiresAt: string;
}

/**
 * Pending approvals whose expiry is at or before `now`, across every tenant (the sweeper is a
 * system actor), soonest expiry first. Several sweepers may see the same rows: the conditional
 * publish of `resolved` lets exactly one of them (or a person) win.
 */
export async function dueApprovals(db: Db, now: Date, limit = 100): Promise<DueApproval[]> {
  const rows = await db
    .selectFrom('approvals')
    .select([
      'tenant',
      'run_id',
      'dispatch_id',
      'approval_key',
      'input_digest',
      'policy_revision',
      'tool_name',
      'on_timeout',
      'expires_at',
    ])
    .where('status', '=', 'pending')
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .orderBy('tenant')
    .orderBy('dispatch_id')
    .limit(Math.max(limit, 1))
    .execute();
  return rows.map((row) => ({
    tenant: row.tenant,
    runId: row.run_id,
    dispatchId: row.dispatch_id,
    approvalKey: row.approval_key,
    inputDigest: row.input_digest,
    policyRevision: row.policy_revision,
    toolName: row.tool_name,
    // The default on timeout is deny (fail closed) when the ask did not say.
    onTimeout: row.on_timeout === 'allow' ? 'allow' : 'deny',
    expiresAt: row.expires_at!.toISOString(),
  }));
}

/**
 * How many approvals each tenant has pending, and when the first of them expires (tenants with
 * none are left out).
 */
export async function pendingApprovalCounts(
  db: Db,
): Promise<{ tenant: string; count: number; nextExpiry: Date }[]> {
  const rows = await db
    .selectFrom('approvals')
    .select([
      'tenant',
      (eb) => eb.fn.countAll<string>().as('count'),
      (eb) => eb.fn.min('expires_at').as('next_expiry'),
    ])
    .where('status', '=', 'pending')
    .groupBy('tenant')
    .execute();
  return rows.map((r) => ({
    tenant: r.tenant,
    count: Number(r.count),
    // A pending approval always has its expiry (set by `suspended`); one without is not due yet.
    nextExpiry: r.next_expiry ? new Date(r.next_expiry) : new Date(8.64e15),
  }));
}
