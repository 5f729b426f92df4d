import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/**
 * A kysely dialect over an embedded PGlite database, for running Toolgate on a laptop without a
 * PostgreSQL server. PGlite is one Postgres backend with a single session, so the driver hands out
 * its one connection to one holder at a time: a transaction owns the session from `begin` to
 * `commit`, and every other query waits for it (a queue, not an error). Otherwise two interleaved
 * transactions would share one session and silently merge.
 */
export interface PGliteDialectConfig {
  /** The database, or a factory called once on first use. */
  database: PGlite | (() => Promise<PGlite>);
  /** Statements run once on the session after it opens (e.g. `set search_path`). */
  onOpen?: (connection: DatabaseConnection) => Promise<void>;
  /** Whether `destroy()` closes the database (default true). */
  closeOnDestroy?: boolean;
}

export class PGliteDialect implements Dialect {
  constructor(private readonly config: PGliteDialectConfig) {}

  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }

  createDriver(): Driver {
    return new PGliteDriver(this.config);
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- kysely's own signature
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}

/** A FIFO mutex: `acquire` resolves with the function that releases it. */
class SessionLock {
  private tail: Promise<void> = Promise.resolve();

  acquire(): Promise<() => void> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const acquired = this.tail.then(() => release);
    this.tail = this.tail.then(() => released);
    return acquired;
  }
}

class PGliteDriver implements Driver {
  private database: PGlite | undefined;
  private connection: PGliteConnection | undefined;
  private readonly lock = new SessionLock();
  /** Releases the session to the next waiter; set while someone holds it. */
  private release: (() => void) | undefined;

  constructor(private readonly config: PGliteDialectConfig) {}

  async init(): Promise<void> {
    const { database } = this.config;
    this.database = typeof database === 'function' ? await database() : database;
    await this.database.waitReady;
    this.connection = new PGliteConnection(this.database);
    if (this.config.onOpen) await this.config.onOpen(this.connection);
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const release = await this.lock.acquire();
    const connection = this.connection;
    if (connection === undefined) {
      release();
      throw new Error('PGlite driver has been destroyed');
    }
    this.release = release;
    return connection;
  }

  async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    let statement = 'begin';
    if (settings.isolationLevel) statement += ` isolation level ${settings.isolationLevel}`;
    if (settings.accessMode) statement += ` ${settings.accessMode}`;
    await connection.executeQuery(CompiledQuery.raw(statement));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdentifier(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(
      CompiledQuery.raw(`rollback to savepoint ${quoteIdentifier(name)}`),
    );
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdentifier(name)}`));
  }

  async releaseConnection(): Promise<void> {
    const release = this.release;
    this.release = undefined;
    release?.();
  }

  async destroy(): Promise<void> {
    // Wait for the current holder so a closing database never cuts a transaction in half.
    const release = await this.lock.acquire();
    try {
      const database = this.database;
      this.database = undefined;
      this.connection = undefined;
      if (database !== undefined && this.config.closeOnDestroy !== false && !database.closed) {
        await database.close();
      }
    } finally {
      release();
    }
  }
}

class PGliteConnection implements DatabaseConnection {
  constructor(private readonly database: PGlite) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.database.query<R>(compiledQuery.sql, [...compiledQuery.parameters]);
    const command = result.command?.toUpperCase();
    const mutates =
      command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
    return {
      rows: result.rows,
      ...(mutates ? { numAffectedRows: BigInt(result.affectedRows ?? 0) } : {}),
    };
  }

  // eslint-disable-next-line require-yield -- declared by the interface; PGlite has no cursors
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('PGliteDialect does not support streaming queries');
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
