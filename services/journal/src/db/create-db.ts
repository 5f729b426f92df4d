import { mkdir } from 'node:fs/promises';
import { CompiledQuery, Kysely, PostgresDialect, type Dialect } from 'kysely';
import pg from 'pg';
import { ConfigError } from '@toolgate/contracts';
import type { Database } from './database';
import { migrateToLatest } from './migrate-to-latest';
import { PGliteDialect } from './pglite-dialect';

/** Where the projection lives. */
export interface CreateDbOptions {
  /** A PostgreSQL connection string; when absent an embedded PGlite database is used. */
  url?: string;
  /** The schema the tables live in (search path and migrations); default: the server's default. */
  schema?: string;
  /** The PGlite data directory (created if missing); required when `url` is absent. */
  pglitePath?: string;
  /** Run migrations before returning (default true: start-up is where they belong). */
  migrate?: boolean;
  /** Pool size for PostgreSQL (default 10). */
  poolMax?: number;
  /** Told when an idle pooled connection drops (the database restarted or the route to it broke). */
  onConnectionLost?(err: Error): void;
}

/** A kysely handle plus what it was opened with. `db.destroy()` ends the pool or closes PGlite. */
export interface JournalDb {
  db: Kysely<Database>;
  kind: 'postgres' | 'pglite';
  schema: string | undefined;
}

const SCHEMA_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** PostgreSQL's int8 OID; node-postgres returns int8 as a string, PGlite as a number. */
const INT8_OID = 20;

/**
 * Opens the journal database: PostgreSQL through a `pg` pool when `url` is given, otherwise an
 * embedded PGlite database on disk at `pglitePath`. Either way the session's `search_path` is the
 * schema, and (unless `migrate: false`) migrations have run under the migrator's lock.
 */
export async function createDb(options: CreateDbOptions): Promise<JournalDb> {
  const { url, schema, pglitePath, migrate = true, poolMax = 10, onConnectionLost } = options;
  if (schema !== undefined && !SCHEMA_PATTERN.test(schema)) {
    throw new ConfigError(
      `journal schema must be a plain SQL identifier, got ${JSON.stringify(schema)}`,
      {
        details: { field: 'schema' },
      },
    );
  }
  let dialect: Dialect;
  let kind: JournalDb['kind'];
  if (url !== undefined && url !== '') {
    kind = 'postgres';
    const pool = new pg.Pool({
      connectionString: url,
      max: poolMax,
      // The schema must exist before a session can use it; `create schema` below runs on the
      // same search path, which is harmless when the schema does not exist yet.
      ...(schema === undefined ? {} : { options: `-c search_path="${schema}"` }),
      // Stream sequences are int8; they stay far below 2^53, and every reader wants a number.
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID
            ? (value: string) => Number(value)
            : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    // An idle connection that drops is no query's failure: the pool discards it and the next query
    // connects afresh. Unheard, the pool's 'error' event would end the process on a database restart.
    pool.on('error', (err) => onConnectionLost?.(err));
    // A connection that drops while checked out (a projection transaction, a readiness probe) fails
    // its query, which the caller handles (the batch is redelivered), and is discarded on release;
    // but pg-pool listens for errors only on idle clients, so the client's own 'error' event would
    // be unheard and end the process. Every client gets a listener of its own for its lifetime.
    pool.on('connect', (client) => client.on('error', (err) => onConnectionLost?.(err)));
    dialect = new PostgresDialect({ pool });
  } else {
    if (pglitePath === undefined || pglitePath === '') {
      throw new ConfigError('journal database: give a PostgreSQL url or a PGlite data directory', {
        details: { field: 'pglitePath' },
      });
    }
    kind = 'pglite';
    await mkdir(pglitePath, { recursive: true });
    dialect = new PGliteDialect({
      // Loaded only here: a journal on PostgreSQL never needs the embedded database's module.
      database: () =>
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        (require('@electric-sql/pglite') as typeof import('@electric-sql/pglite')).PGlite.create(
          pglitePath,
        ),
      onOpen: async (connection) => {
        if (schema === undefined) return;
        await connection.executeQuery(CompiledQuery.raw(`create schema if not exists "${schema}"`));
        await connection.executeQuery(CompiledQuery.raw(`set search_path to "${schema}"`));
      },
    });
  }
  const db = new Kysely<Database>({ dialect });
  try {
    if (migrate) await migrateToLatest(db, schema === undefined ? {} : { schema });
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return { db, kind, schema };
}
