import {
  AckPolicy,
  DeliverPolicy,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { ephemeralName } from './ephemeral-name';
import type {
  DecidedEvent,
  RequestedEvent,
  SettledEvent,
  EventKeys,
  Subjects,
  UntrustedReason,
} from '@toolgate/contracts';
import { trustedEvent } from './event-trust';
import { headersOf } from './lean-headers';

/** A call as the journal recorded it: its `requested`, and the `decided` the chain journaled. */
export interface JournalCall {
  requested: RequestedEvent;
  decided: DecidedEvent;
  /** The stream sequence of `decided`. */
  seq: number;
}

/** Which recorded calls to read: one tenant's, of one run or all, from an instant on. */
export interface JournalCallsFilter {
  tenant: string;
  runId?: string | undefined;
  since?: Date | undefined;
}

/** Counters of a read, filled in as it goes. */
export interface JournalCallsStats {
  /** Messages (requested and decided events) in the window when the read started. */
  total: number;
  /** Messages read so far. */
  read: number;
  /**
   * Messages that were not events this release can read (bad JSON, failed schema) or not signed
   * by their producer: skipped.
   */
  skipped: number;
  /** Of those, the messages skipped as untrusted (`trustedEvent`): never replayed. */
  untrusted: number;
  /** Requested calls with no decision in the window (in flight, or decided after it). */
  undecided: number;
  firstSeq: number;
  lastSeq: number;
}

export interface ReadJournalCallsOptions {
  /** The reader's signing keys: a message not signed for it by its producer is not replayed. */
  keys: EventKeys;
  /** Called once per message skipped as untrusted (metrics). Must not throw. */
  onUntrusted?(reason: UntrustedReason): void;
  /** Called with the counters every `progressEvery` messages, and once at the end. */
  onProgress?: (stats: Readonly<JournalCallsStats>) => void;
  progressEvery?: number;
  /** Stops the read (the iteration ends with an `AbortError`-named error). */
  signal?: AbortSignal;
  /** Messages each consumer keeps buffered (default 2048). */
  batch?: number;
  /**
   * Also reads the calls' `settled` events and hands each one over here, in stream order: a
   * settlement recorded before a call's decision is handed over before that call is yielded
   * (what a replay of the run's error streak needs).
   */
  onSettled?: (settled: SettledEvent, seq: number) => void;
}

/**
 * Reads a tenant's recorded calls from the journal stream: every `requested` joined with its
 * `decided`, in stream order, up to the end the stream had when the read started.
 *
 * Only those two event types are read, each through an ephemeral pull consumer filtered on its
 * subject (`<prefix>.journal.<tenant>.<run|*>.*.<type>`: nats-server 2.9 filters on one subject
 * per consumer), so the broker never sends the rest of the journal. Each consumer answers, when it
 * is created, how many messages it has to deliver: that is the read's `total`, and the point where
 * each side stops. The two sides are merged by stream sequence, so a call's `requested` always
 * comes before its `decided` and only calls still being decided are held in memory. The consumers
 * acknowledge nothing, are deleted at the end and expire on their own if the reader dies.
 */
export function readJournalCalls(
  js: JetStreamClient,
  jsm: JetStreamManager,
  subjects: Subjects,
  filter: JournalCallsFilter,
  options: ReadJournalCallsOptions,
): AsyncIterable<JournalCall> & { readonly stats: Readonly<JournalCallsStats> } {
  const stats: JournalCallsStats = {
    total: 0,
    read: 0,
    skipped: 0,
    untrusted: 0,
    undecided: 0,
    firstSeq: 0,
    lastSeq: 0,
  };
  const decode = (m: JsMsg) => {
    const trusted = trustedEvent(options.keys, m.subject, m.data, headersOf(m));
    if (trusted.ok) return trusted.event;
    if (trusted.reason !== 'not-an-event') {
      stats.untrusted++;
      options.onUntrusted?.(trusted.reason);
    }
    return null;
  };
  const every = Math.max(1, options.progressEvery ?? 1000);
  const stream = subjects.journal.partitionOf(filter.tenant).stream;

  async function* calls(): AsyncGenerator<JournalCall> {
    const sides: Side[] = [];
    const types = options.onSettled
      ? (['requested', 'decided', 'settled'] as const)
      : (['requested', 'decided'] as const);
    try {
      for (const type of types) {
        const info = await jsm.consumers.add(stream, {
          // Named here: a create without a name in its subject can also replace a durable
          // consumer's settings, so deploy/nats grants only the named form (see `ephemeralName`).
          name: ephemeralName('calls'),
          ack_policy: AckPolicy.None,
          filter_subject: subjects.journal.ofTypeIn(type, filter.tenant, filter.runId ?? '*'),
          ...(filter.since
            ? {
                deliver_policy: DeliverPolicy.StartTime,
                opt_start_time: filter.since.toISOString(),
              }
            : { deliver_policy: DeliverPolicy.All }),
          inactive_threshold: nanos(60_000),
          mem_storage: true,
          num_replicas: 1,
        });
        sides.push(new Side(info.name, info.num_pending));
        stats.total += info.num_pending;
      }
      options.onProgress?.(stats);
      for (const side of sides) await side.open(js, stream, options.batch ?? 2048);

      const pending = new Map<string, RequestedEvent>();
      for (;;) {
        // Merge by sequence: take the lower head of the two sides.
        const heads = await Promise.all(sides.map((s) => s.head()));
        let pick = -1;
        for (let i = 0; i < heads.length; i++) {
          const h = heads[i];
          if (h !== undefined && (pick < 0 || h.seq < heads[pick]!.seq)) pick = i;
        }
        if (pick < 0) break;
        options.signal?.throwIfAborted();
        const message = sides[pick]!.take();
        stats.read++;
        if (stats.firstSeq === 0) stats.firstSeq = message.seq;
        stats.lastSeq = Math.max(stats.lastSeq, message.seq);
        if (stats.read % every === 0) options.onProgress?.(stats);
        const event = decode(message);
        if (event?.type === 'requested') {
          pending.set(event.dispatchId, event);
        } else if (event?.type === 'decided') {
          const requested = pending.get(event.dispatchId);
          if (requested !== undefined) {
            pending.delete(event.dispatchId);
            yield { requested, decided: event, seq: message.seq };
          }
          // A decision whose request is before the window: not a call of this window.
        } else if (event?.type === 'settled' && options.onSettled) {
          options.onSettled(event, message.seq);
        } else {
          stats.skipped++;
        }
      }
      stats.undecided = pending.size;
      options.onProgress?.(stats);
    } finally {
      await Promise.all(sides.map((s) => s.close(jsm, stream)));
    }
  }

  return { stats, [Symbol.asyncIterator]: calls };
}

/** One consumer of the merge: its messages in sequence order, up to the count it started with. */
class Side {
  private messages: ConsumerMessages | undefined;
  private iterator: AsyncIterator<JsMsg> | undefined;
  private next: JsMsg | undefined;
  private received = 0;

  constructor(
    readonly name: string,
    private readonly expected: number,
  ) {}

  async open(js: JetStreamClient, stream: string, batch: number): Promise<void> {
    if (this.expected === 0) return;
    this.messages = await (
      await js.consumers.get(stream, this.name)
    ).consume({
      max_messages: batch,
    });
    this.iterator = this.messages[Symbol.asyncIterator]();
  }

  /** The next message without taking it; undefined once this side has delivered everything. */
  async head(): Promise<JsMsg | undefined> {
    if (this.next !== undefined) return this.next;
    if (this.iterator === undefined || this.received >= this.expected) return undefined;
    const r = await this.iterator.next();
    if (r.done) {
      this.iterator = undefined;
      return undefined;
    }
    this.received++;
    // Nothing left behind it (messages removed since the count was taken): this side is done.
    if (r.value.info.pending === 0) this.received = this.expected;
    this.next = r.value;
    return this.next;
  }

  take(): JsMsg {
    const m = this.next!;
    this.next = undefined;
    return m;
  }

  async close(jsm: JetStreamManager, stream: string): Promise<void> {
    // Stops the pull subscription; not `close()`, which waits for an iteration nobody runs now.
    this.messages?.stop();
    // Best effort: an ephemeral consumer expires after its inactive threshold anyway.
    await jsm.consumers.delete(stream, this.name).catch(() => undefined);
  }
}
