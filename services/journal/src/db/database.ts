import type { Kysely, Transaction } from 'kysely';
import type { ApprovalsTable } from './tables/approvals-table';
import type { ArtifactsTable } from './tables/artifacts-table';
import type { AuditLogTable } from './tables/audit-log-table';
import type { DispatchesTable } from './tables/dispatches-table';
import type { RunsTable } from './tables/runs-table';
import type { WorktreesTable } from './tables/worktrees-table';

/** The journal service's projection, as kysely sees it. */
export interface Database {
  audit_log: AuditLogTable;
  dispatches: DispatchesTable;
  approvals: ApprovalsTable;
  runs: RunsTable;
  worktrees: WorktreesTable;
  artifacts: ArtifactsTable;
}

/** Repositories take either, so a caller can compose them inside its own transaction. */
export type Db = Kysely<Database> | Transaction<Database>;

/**
 * Runs a read of several tables in one snapshot (a read-only, repeatable-read transaction), or in
 * the caller's transaction when given one: the projection commits related rows together, and reads
 * from two snapshots can show one of them without the other.
 */
export function inSnapshot<T>(
  db: Db,
  read: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  if (db.isTransaction) return read(db as Transaction<Database>);
  return (db as Kysely<Database>)
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(read);
}

/** Projection tables in a stable order (used by reset and comparison). */
export const PROJECTION_TABLES = [
  'audit_log',
  'dispatches',
  'approvals',
  'runs',
  'worktrees',
  'artifacts',
] as const satisfies readonly (keyof Database)[];
export type ProjectionTable = (typeof PROJECTION_TABLES)[number];

/** Each table's primary key columns, in order. */
export const PRIMARY_KEYS: {
  readonly [T in ProjectionTable]: readonly (keyof Database[T] & string)[];
} = {
  audit_log: ['stream', 'seq'],
  dispatches: ['tenant', 'dispatch_id'],
  approvals: ['tenant', 'dispatch_id'],
  runs: ['tenant', 'run_id'],
  worktrees: ['tenant', 'worktree_id'],
  artifacts: ['tenant', 'ref'],
};
