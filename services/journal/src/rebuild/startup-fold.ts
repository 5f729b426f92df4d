import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { isJsApiError, JsApiCode } from '@toolgate/bus';
import type { Subjects } from '@toolgate/contracts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database';
import type { JournalEntry } from '../projection/apply-event';
import { readJournal } from './read-journal';
import { rebuildProjection } from './rebuild-projection';

/** What the start-up fold did: nothing (null), or how much it folded. */
export interface StartupFold {
  events: number;
  lastSeq: number;
  skipped: number;
}

/**
 * Folds the whole journal stream into an empty projection before the journal serves anything.
 *
 * The live consumer is durable: it resumes after the last event it acknowledged, whatever the
 * database holds. A new database over an existing stream (a fresh PGlite directory, a wiped or new
 * PostgreSQL schema) would therefore serve an empty projection — every past dispatch, run and
 * approval silently gone from the read API. So at start, a projection without a single applied
 * event over a stream with messages is folded from the first sequence, with progress in the log,
 * before the consumer starts (events must be folded in stream order). Events the consumer delivers
 * again afterwards are duplicates of the fold and are skipped by sequence, as any redelivery is.
 * Replicas that start together may both fold; the fold is exactly-once per sequence, so one of them
 * only repeats work.
 */
export async function foldIntoEmptyProjection(
  db: Kysely<Database>,
  js: JetStreamClient,
  jsm: JetStreamManager,
  subjects: Subjects,
  log: (line: string) => void,
  progressEveryMs = 2_000,
): Promise<StartupFold | null> {
  const applied = await db.selectFrom('audit_log').select('seq').limit(1).executeTakeFirst();
  if (applied !== undefined) return null;
  let messages: number;
  let lastSeq: number;
  try {
    const info = await jsm.streams.info(subjects.journal.stream);
    ({ messages, last_seq: lastSeq } = info.state);
  } catch (err) {
    if (isJsApiError(err, JsApiCode.StreamNotFound)) return null;
    throw err;
  }
  if (messages === 0) return null;
  log(
    `journal: the projection is empty but the journal stream holds ${messages} messages (up to sequence ${lastSeq}): folding them before serving`,
  );
  const reader = readJournal(js, subjects);
  let last = Date.now();
  async function* withProgress(): AsyncGenerator<JournalEntry> {
    for await (const entry of reader) {
      yield entry;
      if (Date.now() - last >= progressEveryMs) {
        last = Date.now();
        log(`journal: folded ${reader.stats.read} of ${messages} events (sequence ${entry.seq})`);
      }
    }
  }
  const result = await rebuildProjection(db, withProgress(), { reset: false, batchSize: 500 });
  log(
    `journal: folded ${result.applied} events up to sequence ${result.lastSeq}` +
      (reader.stats.skipped > 0 ? `; ${reader.stats.skipped} messages were not events` : ''),
  );
  return { events: result.applied, lastSeq: result.lastSeq, skipped: reader.stats.skipped };
}
