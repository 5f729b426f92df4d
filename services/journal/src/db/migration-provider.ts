import type { Migration, MigrationProvider } from 'kysely';
import * as createProjection from './migrations/20261130T013716-create-projection.migration';
import * as dispatchTraceId from './migrations/20261206T053500-dispatch-trace-id.migration';
import * as dropAuditRunIndex from './migrations/20261206T090000-drop-audit-run-index.migration';

/**
 * Every migration, listed in code rather than found by scanning a folder, so the compiled `dist`
 * (and a bundled build) runs exactly the migrations it was built with. Keys are timestamp-named:
 * kysely applies them in key order.
 */
export const JOURNAL_MIGRATIONS: Readonly<Record<string, Migration>> = Object.freeze({
  '20261130T013716_create_projection': createProjection,
  '20261206T053500_dispatch_trace_id': dispatchTraceId,
  '20261206T090000_drop_audit_run_index': dropAuditRunIndex,
});

/** A kysely {@link MigrationProvider} over {@link JOURNAL_MIGRATIONS}. */
export const journalMigrationProvider: MigrationProvider = {
  getMigrations: async () => ({ ...JOURNAL_MIGRATIONS }),
};
