// The journal service's read side: the Postgres projection of the journal, its queries, and the
// rebuild from the stream. The NestJS service and the JetStream consumer are wired elsewhere.

export type { Database, Db, ProjectionTable } from './db/database';
export { PROJECTION_TABLES, PRIMARY_KEYS } from './db/database';
export type { AuditLogTable, AuditLogRow } from './db/tables/audit-log-table';
export type { DispatchesTable, DispatchRow } from './db/tables/dispatches-table';
export type { ApprovalsTable, ApprovalRow } from './db/tables/approvals-table';
export type { RunsTable, RunRow } from './db/tables/runs-table';
export type { WorktreesTable, WorktreeRow } from './db/tables/worktrees-table';
export type { ArtifactsTable, ArtifactRow } from './db/tables/artifacts-table';
export type { Json } from './db/tables/json-column';
export { createDb, type CreateDbOptions, type JournalDb } from './db/create-db';
export { migrateToLatest, MIGRATION_TABLE, MIGRATION_LOCK_TABLE } from './db/migrate-to-latest';
export { JOURNAL_MIGRATIONS, journalMigrationProvider } from './db/migration-provider';
export { PGliteDialect, type PGliteDialectConfig } from './db/pglite-dialect';

export {
  evolveDispatch,
  foldDispatch,
  isDispatchEvent,
  DISPATCH_STATUSES,
  type DispatchState,
  type DispatchStatus,
  type DispatchEvent,
} from './projection/dispatch-fold';
export {
  evolveApproval,
  isApprovalEvent,
  type ApprovalState,
  type ApprovalStatus,
  type ApprovalEvent,
} from './projection/approval-fold';
export {
  evolveWorktree,
  isWorktreeEvent,
  WORKTREE_STATUSES,
  type WorktreeState,
  type WorktreeStatus,
} from './projection/worktree-fold';
export { runStatus, type RunStatus } from './projection/run-status';
export {
  applyEvent,
  applyEvents,
  type ApplyOutcome,
  type JournalEntry,
} from './projection/apply-event';

export {
  getDispatch,
  type DispatchView,
  type DispatchWithHistory,
  type RecordedEvent,
} from './queries/dispatch-queries';
export {
  getRun,
  type RunView,
  type RunDispatchSummary,
  type PendingApproval,
} from './queries/run-queries';
export {
  listApprovals,
  getApproval,
  getApprovalForDispatch,
  dueApprovals,
  pendingApprovalCounts,
  type ApprovalFilter,
  type DueApproval,
} from './queries/approval-queries';

export {
  readJournal,
  type JournalReader,
  type JournalReadStats,
  type ReadJournalOptions,
} from './rebuild/read-journal';
export {
  rebuildProjection,
  resetProjection,
  type RebuildOptions,
  type RebuildResult,
} from './rebuild/rebuild-projection';
export {
  compareProjections,
  projectionSnapshot,
  type ProjectionDifference,
  type ProjectionSnapshot,
} from './rebuild/compare-projections';

export { startJournal } from './journal.service';
export { loadJournalConfig, type JournalConfig } from './config';
export { ApprovalTimeoutSweeper } from './service/approval-timeout-sweeper';
export { JournalMetricName } from './service/journal-metrics';
export {
  measureDispatch,
  type DispatchMeasurement,
  type DispatchHop,
} from './projection/dispatch-measurements';
