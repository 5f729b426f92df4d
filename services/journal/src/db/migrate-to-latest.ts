import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { Migrator, type Kysely, type MigrationResult } from 'kysely';
import type { Database } from './database';
import { journalMigrationProvider } from './migration-provider';

/** Kysely's bookkeeping tables, named for this service so it can share a schema with others. */
export const MIGRATION_TABLE = 'journal_migrations';
export const MIGRATION_LOCK_TABLE = 'journal_migrations_lock';

/**
 * Brings the projection schema up to date. Safe to call from every replica at start-up: kysely's
 * Postgres adapter takes an advisory transaction lock, so concurrent starts apply each migration
 * once. Throws an `unavailable` ToolgateError (the migrator's error as `cause`, per-migration results
 * in `details`) on failure.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  options: { schema?: string } = {},
): Promise<MigrationResult[]> {
  const { schema } = options;
  if (schema !== undefined) await db.schema.createSchema(schema).ifNotExists().execute();
  const migrator = new Migrator({
    db: schema === undefined ? db : db.withSchema(schema),
    provider: journalMigrationProvider,
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: MIGRATION_LOCK_TABLE,
    ...(schema === undefined ? {} : { migrationTableSchema: schema }),
  });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    throw new ToolgateError(
      ErrorCode.Unavailable,
      `journal migrations failed: ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
        details: { results: results.map((r) => ({ name: r.migrationName, status: r.status })) },
      },
    );
  }
  return results;
}
