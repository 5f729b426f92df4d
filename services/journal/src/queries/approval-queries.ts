import type { ApprovalOutcome, ApprovalView } from '@toolgate/contracts';
import { sql } from 'kysely';
import type { Db } from '../db/database';
import { errorCodeOf, toIso } from '../db/jsonb';
import type { ApprovalStatus } from '../projection/approval-fold';
import { approvalFromRow } from '../projection/projection-repository';

/** What the pending-approvals listing filters on. The tenant is not optional. */
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
  /** Default 100, at most 1000. */
  limit?: number;
}

/**
 * Approvals of one tenant, each with how its call ended once it settled (`settled`), oldest
 * suspension first or newest activity first. `now` comes from the caller (no clock here).
 */
export async function listApprovals(
  db: Db,
  filter: ApprovalFilter,
  now: Date,
): Promise<ApprovalView[]> {
  const status = filter.status ?? 'pending';
  const limit = Math.min(Math.max(filter.limit ?? 100, 1), 1000);
  let query = db
    .selectFrom('approvals')
    .leftJoin('dispatches', (join) =>
      join
        .onRef('dispatches.tenant', '=', 'approvals.tenant')
        .onRef('dispatches.dispatch_id', '=', 'approvals.dispatch_id'),
    )
    .selectAll('approvals')
    .select([
      'dispatches.outcome as call_outcome',
      'dispatches.error as call_error',
      'dispatches.settled_at as call_settled_at',
    ])
    .where('approvals.tenant', '=', filter.tenant);
  if (status !== 'all') query = query.where('approvals.status', '=', status);
  if (filter.runId !== undefined) query = query.where('approvals.run_id', '=', filter.runId);
  if (filter.tool !== undefined) query = query.where('approvals.tool_name', '=', filter.tool);
  if (filter.key !== undefined) query = query.where('approvals.approval_key', '=', filter.key);
  if (filter.minAgeMs !== undefined) {
    query = query.where('approvals.suspended_at', '<=', new Date(now.getTime() - filter.minAgeMs));
  }
  query =
    filter.order === 'newest'
      ? query
          .orderBy(sql`coalesce(approvals.resolved_at, approvals.suspended_at) desc nulls last`)
          .orderBy('approvals.dispatch_id')
      : query.orderBy('approvals.suspended_at').orderBy('approvals.dispatch_id');
  const rows = await query.limit(limit).execute();
  return rows.map(({ call_outcome, call_error, call_settled_at, ...row }) => ({
    ...approvalFromRow(row),
    settled:
      call_outcome === null || call_settled_at === null
        ? null
        : {
            outcome: call_outcome as ApprovalOutcome['outcome'],
            errorCode: errorCodeOf(call_error),
            at: toIso(call_settled_at),
          },
  }));
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
  return row && approvalFromRow(row);
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
  return row && approvalFromRow(row);
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
