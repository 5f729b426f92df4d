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
  let { error, results = [] } = await migrator.migrateToLatest();
  // Kysely's migrator introspects every schema of the database (pg_get_serial_sequence over all of
  // them); another schema dropped during that scan fails it with "schema ... does not exist"
  // (kysely-org/kysely#1419). That failure is about someone else's schema: try again.
  for (
    let attempt = 1;
    attempt < 5 && error !== undefined && isForeignSchemaRace(error, schema);
    attempt++
  ) {
    await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    ({ error, results = [] } = await migrator.migrateToLatest());
  }
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

function isForeignSchemaRace(error: unknown, own: string | undefined): boolean {
  const message = error instanceof Error ? error.message : String(error);
  const match = /schema "([^"]+)" does not exist/.exec(message);
  return match !== null && match[1] !== own;
}
