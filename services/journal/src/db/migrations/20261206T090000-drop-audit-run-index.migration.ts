import type { Kysely } from 'kysely';

/**
 * Drops `audit_log_run_idx` (tenant, run_id, seq): no query reads the audit log by run (a run's
 * dispatches are read from `dispatches`, a dispatch's history by `audit_log_dispatch_idx`), and
 * every folded event paid for it — a fifth of PostgreSQL's CPU per dispatch. Frozen, like every
 * migration.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a frozen migration must not depend on today's Database type
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('audit_log_run_idx').ifExists().execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('audit_log_run_idx')
    .ifNotExists()
    .on('audit_log')
    .columns(['tenant', 'run_id', 'seq'])
    .execute();
}
