import { DeliverPolicy, type JetStreamClient } from '@nats-io/jetstream';
import { apiThroughElection, headersOf, trustedEvent } from '@toolgate/bus';
import type { EventKeys, Subjects, UntrustedReason } from '@toolgate/contracts';
import type { JournalEntry } from '../projection/apply-event';

/** Counters of a journal read, filled in as it goes. */
export interface JournalReadStats {
  /** Events parsed and yielded. */
  read: number;
  /**
   * Messages that were not journal events (bad JSON, unknown type, failed schema) or were not
   * signed by their producer: skipped.
   */
  skipped: number;
  /** Of those, the messages not signed for the journal by their producer (never folded). */
  untrusted: number;
  /** The last stream sequence seen (0 before the first). */
  lastSeq: number;
}

/** Every journal event in the stream, in stream order, with its sequence. */
export interface JournalReader extends AsyncIterable<JournalEntry> {
  readonly stats: JournalReadStats;
}

export interface ReadJournalOptions {
  /** The journal's signing keys: what is not signed for it by its producer is not folded. */
  keys: EventKeys;
  /** Called once per message skipped as untrusted (metrics). Must not throw. */
  onUntrusted?(reason: UntrustedReason): void;
  /** The first stream sequence to read (default 1). */
  fromSeq?: number;
  /** The last stream sequence to read (default: the stream's last when the read starts). */
  toSeq?: number;
  /** How many messages the consumer keeps buffered (default 256). */
  batch?: number;
  /**
   * The partition whose stream is read (default: the unpartitioned journal's one stream; a
   * partitioned journal has no such stream, and the read fails with a `ConfigError`).
   */
  partition?: number;
}

/**
 * Reads the journal stream from `fromSeq` up to `toSeq` or the end it had when the read started,
 * through an ordered consumer (ephemeral, flow-controlled, in stream order, re-created by the
 * client on a gap: exactly what a replay needs, and nothing to clean up on the server). Each
 * message is verified and parsed as the projection's consumer does (`trustedEvent`); one that is
 * not a trusted event is skipped and counted, never fatal, so one bad publish cannot block a
 * rebuild, and a forged one is folded neither live nor in a rebuild.
 *
 * The iteration ends when the consumer reports nothing pending, so events published during the
 * read may or may not be included; a catch-up from `stats.lastSeq + 1` picks them up.
 */
export function readJournal(
  js: JetStreamClient,
  subjects: Subjects,
  options: ReadJournalOptions,
): JournalReader {
  const stats: JournalReadStats = { read: 0, skipped: 0, untrusted: 0, lastSeq: 0 };
  const fromSeq = Math.max(options.fromSeq ?? 1, 1);
  const partition =
    options.partition === undefined ? undefined : subjects.journal.partitions[options.partition];
  const streamName = partition ? partition.stream : subjects.journal.stream;
  const filter = partition ? partition.all : subjects.journal.all;

  async function* entries(): AsyncGenerator<JournalEntry> {
    // Asked again while the stream elects a leader (its leader's node just died, see
    // `apiThroughElection`): a rebuild or a start-up fold waits the election out, not failing on it.
    const info = await apiThroughElection(async () => (await js.streams.get(streamName)).info());
    const endSeq = Math.min(info.state.last_seq, options.toSeq ?? Infinity);
    // Without this check an empty (or already fully read) stream would leave the consumer waiting.
    if (info.state.messages === 0 || endSeq < fromSeq) return;
    // The ordered consumer is made by the cluster's meta leader: asked again through its election.
    const messages = await apiThroughElection(async () => {
      const consumer = await js.consumers.get(streamName, {
        filter_subjects: filter,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: fromSeq,
      });
      return consumer.consume({ max_messages: options.batch ?? 256 });
    });
    try {
      for await (const message of messages) {
        stats.lastSeq = message.seq;
        const trusted = trustedEvent(
          options.keys,
          message.subject,
          message.data,
          headersOf(message),
        );
        if (!trusted.ok) {
          stats.skipped += 1;
          if (trusted.reason !== 'not-an-event') {
            stats.untrusted += 1;
            options.onUntrusted?.(trusted.reason);
          }
        } else {
          stats.read += 1;
          yield { event: trusted.event, seq: message.seq, stream: message.info.stream };
        }
        if (message.info.pending === 0 || message.seq >= endSeq) break;
      }
    } finally {
      await messages.close();
    }
  }

  return { stats, [Symbol.asyncIterator]: entries };
}
