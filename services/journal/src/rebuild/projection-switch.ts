import { ErrorCode, ToolgateError, type JournalRebuildReport } from '@toolgate/contracts';
import { sql, type Kysely, type Transaction } from 'kysely';
import { PROJECTION_TABLES, type Database } from '../db/database';
import { MIGRATION_TABLE, migrateToLatest } from '../db/migrate-to-latest';
import { applyEvents, type JournalEntry } from '../projection/apply-event';

/**
 * A read of a journal stream from a sequence on, and what it skipped (not events, not trusted):
 * `stream` is one of {@link SwitchOptions.streams}, undefined when none are named.
 */
export type StreamRead = (
  fromSeq: number,
  stream: string | undefined,
) => AsyncIterable<JournalEntry> & {
  readonly stats: { readonly skipped: number };
};

export interface SwitchOptions {
  /** The schema to rebuild into (validated by the caller's schema; checked again here). */
  into?: string | undefined;
  /** Reads a journal stream from a sequence to the end it has when the read starts. */
  read: StreamRead;
  /**
   * The journal's streams, each folded in turn with its own sequences (a partitioned journal's: a
   * tenant's events are all in one, and each is folded in its order, as live). Default: the one
   * stream `read` reads.
   */
  streams?: readonly string[];
  /** Progress of each phase: `rebuild` (events folded of the live projection's), `compare`. */
  onProgress?: (phase: string, done: number, total: number) => void;
  /** Switch even when the two differ (the differences are reported). */
  force?: boolean;
  /** How often the final, locked step is tried before giving up (default 5). */
  attempts?: number;
  /** Wait between two attempts (default 500 ms). */
  retryDelayMs?: number;
  batchSize?: number;
}

/**
 * Session-level advisory lock key: one rebuild at a time of a projection (its live schema),
 * whichever replica runs it. Projections in other schemas of the same database (another
 * deployment, another prefix) rebuild independently.
 */
const REBUILD_LOCK = sql`hashtextextended('toolgate-journal-rebuild ' || current_schema(), 0)`;
const SCHEMA_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Rebuilds the projection from the stream into a schema of its own, checks it equals the live one
 * row for row, and switches: the rebuilt tables take the live schema's place (readers and the live
 * fold keep using the same name), and the replaced ones move into `into`.
 *
 * Everything runs on one connection with its `search_path` on `into` (the fold's SQL names tables
 * without a schema), restored at the end:
 * 1. `into` is created and migrated (an existing `into` is dropped first, but only when it holds a
 *    journal projection: it has the journal's migration table).
 * 2. The stream is folded into it up to the live projection's last applied sequence, then caught
 *    up once more — without holding anything up (on PostgreSQL; PGlite has one session, so the
 *    journal waits for the rebuild).
 * 3. In one transaction that locks the live tables against writes: the events the live projection
 *    has applied since are folded too (only those: a live projection may have gaps its consumer is
 *    still retrying), both projections are compared with `EXCEPT ALL` over whole rows, and when they
 *    are equal each table is moved with `ALTER TABLE … SET SCHEMA`. A live fold blocked by the lock
 *    finds, once it commits, the tables now standing under the live name (PostgreSQL looks a
 *    relation up again after waiting for its lock). When the rebuilt projection has applied an event
 *    the live one has not (a gap), the transaction is rolled back and tried again after a pause.
 *
 * Not equal after the last attempt: nothing is switched (unless `force`) and the differences are
 * reported.
 * @throws ToolgateError `conflict` when another rebuild runs, `invalid-request` for a bad `into`
 */
export async function rebuildAndSwitch(
  db: Kysely<Database>,
  options: SwitchOptions,
): Promise<JournalRebuildReport> {
  const attempts = options.attempts ?? 5;
  const batchSize = options.batchSize ?? 500;
  const progress = options.onProgress ?? (() => undefined);
  return db.connection().execute(async (conn) => {
    const locked = await sql<{
      ok: boolean;
      key: string;
    }>`select pg_try_advisory_lock(k) as ok, k::text as key from (select ${REBUILD_LOCK} as k) l`.execute(
      conn,
    );
    // Unlocked by its value: the search path (and so `current_schema()`) moves meanwhile.
    const lockKey = locked.rows[0]!.key;
    if (!locked.rows[0]?.ok)
      throw new ToolgateError(ErrorCode.Conflict, 'a journal rebuild is already running');
    const searchPath = (await sql<{ search_path: string }>`show search_path`.execute(conn)).rows[0]!
      .search_path;
    try {
      const live = (await sql<{ schema: string }>`select current_schema() as schema`.execute(conn))
        .rows[0]!.schema;
      const into = options.into ?? `${live}_rebuild`.slice(0, 63);
      if (!SCHEMA_PATTERN.test(into))
        throw new ToolgateError(ErrorCode.InvalidRequest, `not a schema name: ${into}`);
      if (into === live)
        throw new ToolgateError(
          ErrorCode.InvalidRequest,
          `cannot rebuild into the live schema ${live}`,
        );
      await prepareSchema(conn, into);
      await sql`set search_path to ${sql.id(into)}`.execute(conn);

      const report = { live, into, events: 0, lastSeq: 0, skipped: 0 };
      const streams = options.streams ?? [undefined];
      /** Each stream's last sequence read (folded, or skipped as not an event). */
      const last = new Map<string | undefined, number>(streams.map((s) => [s, 0]));
      const fold = async (
        target: Kysely<Database> | Transaction<Database>,
        stream: string | undefined,
        upTo: number,
        only?: ReadonlySet<number>,
      ): Promise<void> => {
        const reader = options.read(last.get(stream)! + 1, stream);
        let batch: JournalEntry[] = [];
        const flush = async () => {
          if (batch.length === 0) return;
          const entries = batch;
          batch = [];
          report.events += target.isTransaction
            ? await applyEvents(target as Transaction<Database>, entries)
            : await (target as Kysely<Database>)
                .transaction()
                .execute((trx) => applyEvents(trx, entries));
          progress('rebuild', last.get(stream)!, upTo);
        };
        let seen = last.get(stream)!;
        for await (const entry of reader) {
          if (entry.seq > upTo) break;
          seen = entry.seq;
          if (only === undefined || only.has(entry.seq)) {
            batch.push(entry);
            last.set(stream, entry.seq);
          }
          if (batch.length >= batchSize) await flush();
        }
        await flush();
        // Past what was read, whether folded or not: the next read starts after it.
        if (only === undefined) last.set(stream, Math.max(last.get(stream)!, seen));
        report.lastSeq = Math.max(...last.values());
        report.skipped += reader.stats.skipped;
      };

      // 2. Up to what the live projection has applied, twice (it moves on meanwhile).
      for (let round = 0; round < 2; round++)
        for (const stream of streams) await fold(conn, stream, await maxSeq(conn, live, stream));

      // 3. Locked: the last events, the comparison, the switch.
      let differences: JournalRebuildReport['differences'] = [];
      let reason = '';
      for (let attempt = 1; attempt <= attempts; attempt++) {
        const outcome = await conn.transaction().execute(async (trx) => {
          await sql`lock table ${sql.join(
            PROJECTION_TABLES.map((t) => sql.table(`${live}.${t}`)),
          )} in exclusive mode`.execute(trx);
          const ahead = await sql<{ n: number }>`select count(*)::int as n from (
              select stream, seq from ${sql.table(`${into}.audit_log`)}
              except select stream, seq from ${sql.table(`${live}.audit_log`)}) d`.execute(trx);
          if ((ahead.rows[0]?.n ?? 0) > 0) {
            return {
              switched: false,
              retry: true,
              reason: `the rebuilt projection holds ${ahead.rows[0]!.n} events the live one has not applied (yet: a redelivery pending, or dead-lettered)`,
            } as const;
          }
          for (const stream of streams) {
            const liveSeqs = await sql<{ seq: number }>`select seq from ${sql.table(
              `${live}.audit_log`,
            )} where seq > ${last.get(stream)!}${inStream(stream)}`.execute(trx);
            const wanted = new Set(liveSeqs.rows.map((r) => Number(r.seq)));
            if (wanted.size > 0) await fold(trx, stream, Math.max(...wanted), wanted);
          }
          differences = await compare(trx, live, into, progress);
          if (differences.length > 0 && options.force !== true) {
            return {
              switched: false,
              retry: false,
              reason: 'the rebuilt projection differs from the live one',
            } as const;
          }
          await swap(trx, live, into);
          return { switched: true, retry: false, reason: '' } as const;
        });
        const partitions = partitionsOf(last);
        if (outcome.switched) return { ...report, ...partitions, switched: true, differences };
        reason = outcome.reason;
        if (!outcome.retry) break;
        if (attempt < attempts)
          await new Promise((resolve) => setTimeout(resolve, options.retryDelayMs ?? 500));
      }
      return { ...report, ...partitionsOf(last), switched: false, differences, reason };
    } finally {
      await sql`select set_config('search_path', ${searchPath}, false)`.execute(conn);
      await sql`select pg_advisory_unlock(${lockKey}::bigint)`.execute(conn);
    }
  });
}

/** Creates and migrates `into`, dropping it first when it holds a journal projection. */
async function prepareSchema(conn: Kysely<Database>, into: string): Promise<void> {
  const schema = await sql<{
    n: number;
  }>`select count(*)::int as n from information_schema.schemata where schema_name = ${into}`.execute(
    conn,
  );
  if ((schema.rows[0]?.n ?? 0) > 0) {
    const ours = await sql<{ n: number }>`select count(*)::int as n from information_schema.tables
      where table_schema = ${into} and table_name = ${MIGRATION_TABLE}`.execute(conn);
    if ((ours.rows[0]?.n ?? 0) === 0)
      throw new ToolgateError(
        ErrorCode.Conflict,
        `schema ${into} exists and is not a journal projection; name another with --into`,
        { details: { into } },
      );
    await sql`drop schema ${sql.id(into)} cascade`.execute(conn);
  }
  await migrateToLatest(conn, { schema: into });
}

async function maxSeq(
  conn: Kysely<Database>,
  schema: string,
  stream: string | undefined,
): Promise<number> {
  const r = await sql<{ seq: number | null }>`select max(seq) as seq from ${sql.table(
    `${schema}.audit_log`,
  )} where true${inStream(stream)}`.execute(conn);
  return Number(r.rows[0]?.seq ?? 0);
}

/** `audit_log`'s rows of one stream (each keeps the stream it was read from); all when unnamed. */
function inStream(stream: string | undefined) {
  return stream === undefined ? sql`` : sql` and stream = ${stream}`;
}

/** The report's `partitions`: each stream's last sequence, when several were folded. */
function partitionsOf(last: ReadonlyMap<string | undefined, number>) {
  if (last.size < 2) return {};
  return { partitions: [...last].map(([stream, lastSeq]) => ({ stream: stream!, lastSeq })) };
}

/** Rows each side has that the other has not, per table (whole rows: every column compared). */
async function compare(
  trx: Transaction<Database>,
  live: string,
  into: string,
  progress: (phase: string, done: number, total: number) => void,
): Promise<JournalRebuildReport['differences']> {
  const differences: JournalRebuildReport['differences'] = [];
  for (const [i, table] of PROJECTION_TABLES.entries()) {
    const a = sql.table(`${live}.${table}`);
    const b = sql.table(`${into}.${table}`);
    const r = await sql<{ only_in_live: number; only_in_rebuilt: number }>`select
        (select count(*)::int from (select * from ${a} except all select * from ${b}) x) as only_in_live,
        (select count(*)::int from (select * from ${b} except all select * from ${a}) y) as only_in_rebuilt`.execute(
      trx,
    );
    const row = r.rows[0]!;
    if (row.only_in_live > 0 || row.only_in_rebuilt > 0)
      differences.push({
        table,
        onlyInLive: row.only_in_live,
        onlyInRebuilt: row.only_in_rebuilt,
      });
    progress('compare', i + 1, PROJECTION_TABLES.length);
  }
  return differences;
}

/** Moves the rebuilt tables under the live name and the live ones into `into`. */
async function swap(trx: Transaction<Database>, live: string, into: string): Promise<void> {
  const parking = `${into}_swap`.slice(0, 63);
  await sql`create schema ${sql.id(parking)}`.execute(trx);
  for (const table of PROJECTION_TABLES) {
    await sql`alter table ${sql.table(`${live}.${table}`)} set schema ${sql.id(parking)}`.execute(
      trx,
    );
    await sql`alter table ${sql.table(`${into}.${table}`)} set schema ${sql.id(live)}`.execute(trx);
    await sql`alter table ${sql.table(`${parking}.${table}`)} set schema ${sql.id(into)}`.execute(
      trx,
    );
  }
  await sql`drop schema ${sql.id(parking)}`.execute(trx);
}
