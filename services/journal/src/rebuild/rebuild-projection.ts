import { sql, type Kysely } from 'kysely';
import { PROJECTION_TABLES, type Database } from '../db/database';
import { applyEvents, type JournalEntry } from '../projection/apply-event';

export interface RebuildOptions {
  /** Empty the projection tables first (default true). */
  reset?: boolean;
  /** Events folded per transaction (default 200): fewer commits, same exactly-once rule. */
  batchSize?: number;
}

export interface RebuildResult {
  applied: number;
  duplicates: number;
  lastSeq: number;
}

/**
 * Replays journal events into the projection `db` points at, with the same `applyEvents` the live
 * consumer uses, so a rebuild and the live fold cannot disagree by construction of two code paths.
 *
 * Rebuild into fresh tables: a database/schema of its own (`createDb({ schema })`, compare, then
 * switch readers over), or these tables with `reset` while the live consumer is stopped. Resetting
 * tables a live consumer is writing to would race it.
 */
export async function rebuildProjection(
  db: Kysely<Database>,
  events: AsyncIterable<JournalEntry>,
  options: RebuildOptions = {},
): Promise<RebuildResult> {
  const { reset = true, batchSize = 200 } = options;
  if (reset) await resetProjection(db);
  const result: RebuildResult = { applied: 0, duplicates: 0, lastSeq: 0 };
  let batch: JournalEntry[] = [];
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const entries = batch;
    batch = [];
    const applied = await db.transaction().execute((trx) => applyEvents(trx, entries));
    result.applied += applied;
    result.duplicates += entries.length - applied;
    for (const entry of entries) result.lastSeq = Math.max(result.lastSeq, entry.seq);
  };
  for await (const entry of events) {
    batch.push(entry);
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  return result;
}

/** Empties every projection table (one statement, so readers never see half of them emptied). */
export async function resetProjection(db: Kysely<Database>): Promise<void> {
  await sql`truncate table ${sql.join(PROJECTION_TABLES.map((t) => sql.table(t)))}`.execute(db);
}
