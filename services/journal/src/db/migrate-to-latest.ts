import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import {
  Migrator,
  sql,
  type DatabaseIntrospector,
  type Kysely,
  type MigrationResult,
  type TableMetadata,
} from 'kysely';
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
    db: schema === undefined ? db : withSchemaIntrospection(db.withSchema(schema), db, schema),
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

/**
 * `migratorDb` whose introspection sees only `schema`'s tables. Kysely's migrator asks whether its
 * two tables exist by introspecting every column of every table in every schema of the database
 * (with `pg_get_serial_sequence` per column), then keeps the table of that name in its own schema:
 * on a database that many schemas share (a test run's, a multi-tenant one's) that scan was most of
 * the migrations' cost at every start, and the cause of kysely-org/kysely#1419. The migrator asks
 * nothing else (names and schemas decide); the columns are not what it looks at, so none are read.
 */
function withSchemaIntrospection<DB>(
  migratorDb: Kysely<DB>,
  db: Kysely<DB>,
  schema: string,
): Kysely<DB> {
  const getTables = async (): Promise<TableMetadata[]> => {
    const { rows } = await sql<{ name: string; kind: string }>`
      select c.relname as name, c.relkind as kind
      from pg_catalog.pg_class c
      join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      where ns.nspname = ${schema} and c.relkind in ('r', 'v', 'p')
      order by c.relname`.execute(db);
    return rows.map((r) => ({ name: r.name, schema, isView: r.kind === 'v', columns: [] }));
  };
  const introspection: DatabaseIntrospector = {
    getSchemas: () => db.introspection.getSchemas(),
    getTables,
    getMetadata: async () => ({ tables: await getTables() }),
  };
  // Everything else is the Kysely instance's own (bound to it: its state is in private fields).
  return new Proxy(migratorDb, {
    get(target, prop) {
      if (prop === 'introspection') return introspection;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
