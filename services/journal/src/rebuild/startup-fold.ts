import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { consumerName, isJsApiError, JsApiCode } from '@toolgate/bus';
import {
  ConsumerRole,
  ErrorCode,
  ToolgateError,
  type EventKeys,
  type Subjects,
  type UntrustedReason,
} from '@toolgate/contracts';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database';
import type { JournalEntry } from '../projection/apply-event';
import { readJournal } from './read-journal';
import { rebuildProjection } from './rebuild-projection';

/** What the start-up fold did: nothing (null), or how much it folded. */
export interface StartupFold {
  fromSeq: number;
  toSeq: number;
  events: number;
  skipped: number;
}

/**
 * Folds into the projection, before the journal serves anything, what its durable consumer will
 * never deliver again: the events up to the last one it was delivered, past the last one this
 * database applied.
 *
 * The consumer resumes after what it acknowledged, whatever the database holds. A new database over
 * an existing stream (a fresh PGlite directory, a wiped or new PostgreSQL schema), one restored from
 * an older backup, or a start-up fold cut short would otherwise serve a projection with history
 * silently missing. Events above the consumer's last delivery come from the consumer as usual;
 * events it delivers again are duplicates of the fold and are skipped by sequence, as any
 * redelivery is. Folded in stream order, in batches, with progress in the log, before the consumer
 * starts. Replicas that start together may both fold; the fold is exactly-once per sequence, so one
 * of them only repeats work. `onUntrusted` hears of each message skipped as not signed by its
 * producer (metrics).
 */
export async function foldWhatTheConsumerPassed(
  db: Kysely<Database>,
  js: JetStreamClient,
  jsm: JetStreamManager,
  subjects: Subjects,
  log: (line: string) => void,
  keys: EventKeys,
  onUntrusted?: (reason: UntrustedReason) => void,
  progressEveryMs = 2_000,
): Promise<StartupFold | null> {
  // A partitioned journal: each partition's stream against its own consumer and its own rows of
  // `audit_log` (keyed by stream and sequence). What is reported is the last partition folded.
  let folded: StartupFold | null = null;
  for (const partition of subjects.journal.partitions) {
    const one = await foldPartition(
      db,
      js,
      jsm,
      subjects,
      partition.index,
      log,
      keys,
      onUntrusted,
      progressEveryMs,
    );
    folded = one ?? folded;
  }
  return folded;
}

async function foldPartition(
  db: Kysely<Database>,
  js: JetStreamClient,
  jsm: JetStreamManager,
  subjects: Subjects,
  index: number,
  log: (line: string) => void,
  keys: EventKeys,
  onUntrusted: ((reason: UntrustedReason) => void) | undefined,
  progressEveryMs: number,
): Promise<StartupFold | null> {
  const stream = subjects.journal.partitions[index]!.stream;
  const partition = subjects.journal.partitionCount > 1 ? index : undefined;
  const applied = Number(
    (
      await sql<{
        seq: number | null;
      }>`select max(seq) as seq from audit_log where stream = ${stream}`.execute(db)
    ).rows[0]?.seq ?? 0,
  );
  let delivered: number;
  try {
    const info = await jsm.consumers.info(
      stream,
      consumerName(subjects, { role: ConsumerRole.Journal, eventType: '*' }),
    );
    delivered = info.delivered.stream_seq;
  } catch (err) {
    // No stream or no consumer yet: it will deliver everything from the first event — unless this
    // projection has folded a stream of that name already, which is then gone or was made anew.
    if (isJsApiError(err, JsApiCode.StreamNotFound)) {
      refuseAReplacedStream(stream, applied, null);
      return null;
    }
    if (isJsApiError(err, JsApiCode.ConsumerNotFound)) {
      refuseAReplacedStream(stream, applied, (await jsm.streams.info(stream)).state.last_seq);
      return null;
    }
    throw err;
  }
  if (delivered <= applied) return null;
  const fromSeq = applied + 1;
  // Up to what the consumer was delivered: what it will deliver, it counts and skips itself.
  const reader = readJournal(js, subjects, {
    fromSeq,
    toSeq: delivered,
    keys,
    onUntrusted,
    ...(partition !== undefined ? { partition } : {}),
  });
  let last = Date.now();
  let announced = false;
  const total = delivered - applied;
  async function* upToDelivered(): AsyncGenerator<JournalEntry> {
    for await (const entry of reader) {
      // Said once there is something to fold: messages that are not events (the consumer skipped
      // them too) at the end of the stream are not worth a line at every start.
      if (!announced) {
        announced = true;
        log(
          applied === 0
            ? `journal: the projection is empty but the journal consumer was delivered events up to sequence ${delivered}: folding them from the stream before serving`
            : `journal: the projection has applied events up to sequence ${applied} but the journal consumer was delivered events up to ${delivered}: folding ${fromSeq}-${delivered} from the stream before serving`,
        );
      }
      yield entry;
      if (Date.now() - last >= progressEveryMs) {
        last = Date.now();
        log(`journal: folded ${entry.seq - applied} of ${total} (sequence ${entry.seq})`);
      }
    }
  }
  const result = await rebuildProjection(db, upToDelivered(), { reset: false, batchSize: 500 });
  if (!announced) return null;
  log(
    `journal: folded ${result.applied} events of sequences ${fromSeq}-${delivered}` +
      (reader.stats.skipped > 0
        ? `; ${reader.stats.skipped} messages were not events` +
          (reader.stats.untrusted > 0
            ? ` (${reader.stats.untrusted} of them not signed by their producer)`
            : '')
        : ''),
  );
  return { fromSeq, toSeq: delivered, events: result.applied, skipped: reader.stats.skipped };
}

/**
 * The journal stream is the source of truth, and the projection keys what it folded by stream and
 * sequence. A stream that is missing (deleted, a broker that lost its store) or was created anew
 * (by any service's start-up: it ends below what this projection folded) under a projection that
 * folded the old one must not be created or folded as if nothing happened: its sequences start
 * again at 1, and the projection would take its events for ones it applied already and drop them.
 * The start-up fails (retryably: it is retried, saying so, until the stream is restored) instead.
 */
function refuseAReplacedStream(stream: string, applied: number, lastSeq: number | null): void {
  if (applied === 0 || (lastSeq !== null && lastSeq >= applied)) return;
  throw new ToolgateError(
    ErrorCode.Unavailable,
    `the journal stream ${stream} ${lastSeq === null ? 'is missing' : `ends at sequence ${lastSeq} (it was created anew)`}, but this projection has folded it up to sequence ${applied}: not creating or folding a new one in its place. Restore the stream from a backup (it is the source of truth), or give the journal a fresh JOURNAL_SCHEMA to start over with an empty history`,
    { details: { stream, applied, lastSeq } },
  );
}
