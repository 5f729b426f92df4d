import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import {
  ErrorCode,
  toWireError,
  type ConsumerRole,
  type JournalEvent,
  type EventKeys,
  type Subjects,
  type UntrustedReason,
  type WireError,
} from '@toolgate/contracts';
import { Attr, consumerSpan, recordFailure } from '@toolgate/telemetry';
import { isPullHeartbeatLost } from './nats-errors';
import { trustedEvent } from './event-trust';
import { headersOf, leanHeaders } from './lean-headers';

/** What a handler sees besides the event. */
export interface DeliveryContext {
  /** 1 on first delivery. */
  deliveryCount: number;
  /** Stream sequence of the event. */
  seq: number;
  /** Whether this is the last delivery before the message is dead-lettered. */
  lastAttempt: boolean;
  /** Tells the broker the handler is still working (extends the ack deadline). */
  working(): void;
  /**
   * Gives the message back for redelivery now (a nak without delay), without it counting as a
   * failure: `handle` then resolves and the message is neither acked nor dead-lettered. For work
   * abandoned on purpose (a stopping replica), which another replica is to pick up at once.
   */
  handBack(): void;
  msg: JsMsg;
}

/** Why a message was dead-lettered. */
export interface PoisonReport {
  role: ConsumerRole;
  consumer: string;
  subject: string;
  seq: number;
  deliveryCount: number;
  /** The event, when the payload parsed as one. */
  event: JournalEvent | null;
  error: WireError;
}

export interface JournalConsumerOptions {
  js: JetStreamClient;
  subjects: Subjects;
  role: ConsumerRole;
  /**
   * Durable consumer name (see `ensureConsumer`). Its `max_deliver` is read from the broker: the
   * last delivery dead-letters instead of nak-ing.
   */
  consumer: string;
  /** The stream the consumer is on: its journal partition's (default: the unpartitioned journal's). */
  stream?: string;
  /**
   * The service's signing keys. Every message is verified before anything else: one that is not
   * signed for this service by a producer of its type (`trustedEvent`) is dead-lettered at once
   * with `unauthorized` and its reason, never handed to `handle`, never to `onPoison` (a forged
   * event must not settle a real dispatch, even as an error), and reported to `onUntrusted`.
   */
  keys: EventKeys;
  /** Called once per message refused as untrusted (metrics). Must not throw. */
  onUntrusted?(role: ConsumerRole, reason: UntrustedReason): void;
  /** Redelivery delay after a failure, by delivery count (1-based); the last value repeats. */
  backoffMs?: number[];
  /** Messages processed at once by this replica. Order across dispatches is not kept when > 1. */
  concurrency?: number;
  /** Handles one event; resolving acks it, throwing naks it (or dead-letters it on the last try). */
  handle(event: JournalEvent, delivery: DeliveryContext): Promise<void>;
  /** Called after a message is dead-lettered, e.g. to settle its dispatch as an error. */
  onPoison?(report: PoisonReport): Promise<void>;
  /**
   * Errors the loop itself hit, including a dead-lettering (its publish or `onPoison`) that failed
   * and left a message unsettled (logged by the caller).
   */
  onError?(err: unknown): void;
  /**
   * Called once per settled message with how it was settled and how long it took (metrics).
   * `eventType` is `unknown` for a payload that is not a journal event. Must not throw.
   */
  onProcessed?(
    role: ConsumerRole,
    eventType: string,
    outcome: ProcessedOutcome,
    seconds: number,
  ): void;
}

/** How a message was settled: acked, nak-ed for redelivery, or dead-lettered (and terminated). */
export type ProcessedOutcome = 'ack' | 'nak' | 'dead-letter';

/** A message a handler is working on (for a stop to say what it waits for). */
export interface InFlightMessage {
  subject: string;
  seq: number;
  /** When its handler took it (ms since the epoch). */
  sinceMs: number;
}

export interface RunningConsumer {
  /** Stops pulling, waits for in-flight handlers to finish and settle their messages. */
  stop(): Promise<void>;
  /** The messages handlers are working on now, oldest first. */
  inFlight(): InFlightMessage[];
  /**
   * Resolves once the consumer is pulling; rejects if it could not start (the consumer's info did
   * not come back), so the service's start-up fails and is retried instead of running without it.
   */
  readonly ready: Promise<void>;
}

/** One event of a batch, with its stream position. */
export interface BatchEntry {
  event: JournalEvent;
  seq: number;
  stream: string;
}

/** Batch handling: the consumer's events applied several at a time (in stream order). */
export interface BatchHandling {
  /** Most events per call. */
  maxBatch: number;
  /**
   * How long the oldest queued event may wait for others to join its run, counted from when the
   * broker stored it (default 0: a run is whatever is queued when the handler is free). Under
   * light load this turns one transaction per event into one per few dispatches, at the cost of
   * that much staleness; the events of a backlog, stored long before they are pulled, never wait.
   * A broker clock behind this one shortens the wait; one ahead of it never lengthens it.
   */
  lingerMs?: number;
  /** This service's clock for the linger, ms since the epoch (default `Date.now`). */
  now?(): number;
  /**
   * Runs applied at once (default 1). Messages are split into lanes by {@link laneKey}: one lane
   * applies its runs one after another in stream order, lanes run side by side. Order is kept
   * among the messages of one key, not across keys.
   */
  lanes?: number;
  /**
   * The key whose messages must be applied in stream order, from the message's subject (default:
   * the whole subject). Only read when `lanes` > 1.
   */
  laneKey?(subject: string): string;
  /** Applies all or none of the batch; throwing falls back to one event at a time through `handle`. */
  handleBatch(entries: BatchEntry[]): Promise<void>;
}

/** What settling a message needs: the loop's options and the broker's max_deliver. */
type Settlement = JournalConsumerOptions & { maxDeliver: number };

/** How long one pull waits for messages; also the longest a stop waits for the current pull. */
const FETCH_EXPIRES_MS = 1000;
/**
 * How long past its expiry a pull that has not ended is presumed dropped by the broker, and the
 * next one sent. nats-server 2.9 ends an expired pull with a 408 status, but not always: a message
 * arriving as the pull expires can make it drop the pull unannounced (seen once in ~20 expiries of
 * a partly filled pull at 200 events/s), and the client then waits for two missed idle heartbeats
 * — a second in which nothing is pulled while events wait in the stream.
 */
const FETCH_OVERDUE_MS = 100;
/** Events of a batch parsed between two turns of the event loop (see `processBatch`). */
const DECODE_SLICE = 64;
/** Pause after a failed pull (broker restarting, connection reconnecting) before the next one. */
const PULL_RETRY_MS = 250;

/** Messages waiting for a worker; with lanes, each lane's worker has a queue of its own. */
interface Lane {
  msgs: JsMsg[];
  /**
   * When the broker stored the oldest message now queued (ms since the epoch, no later than this
   * clock's now); 0 once it has waited its turn.
   */
  oldestStoredAt: number;
  /** Ends the worker's linger early (set while it lingers). */
  lingering: (() => void) | undefined;
  /**
   * A run holding this lane's keys is being applied (its own worker's, or one that took this
   * lane's queue along, see `mergeIdleLanes`): nothing more of the lane starts until it is done.
   */
  applying: boolean;
}

/**
 * Runs a durable pull consumer: each message is parsed as a journal event and handed to `handle`,
 * then settled explicitly — ack on success, nak with backoff on failure, and on the last delivery
 * (or a payload that is not an event) a copy goes to the dead-letter stream, `onPoison` runs and the
 * message is terminated, so a poison message never loops. With `batch`, runs of queued events are
 * handed over together (one transaction for the journal's projection) when load allows, in lanes
 * that apply side by side.
 */
export function runJournalConsumer(
  options: JournalConsumerOptions & { batch?: BatchHandling },
): RunningConsumer {
  const batch = options.batch;
  const laneCount = batch ? Math.max(1, batch.lanes ?? 1) : 1;
  const concurrency = batch ? laneCount : Math.max(1, options.concurrency ?? 1);
  const maxBatch = batch?.maxBatch ?? 1;
  const lingerMs = batch?.lingerMs ?? 0;
  const now = batch?.now ?? Date.now;
  const laneKey = batch?.laneKey ?? ((subject: string) => subject);
  const lanes: Lane[] = Array.from({ length: laneCount }, () => ({
    msgs: [],
    oldestStoredAt: 0,
    lingering: undefined,
    applying: false,
  }));
  let queued = 0;
  // One at a time, a handler's messages are pulled only for free workers: a message pulled for a
  // busy replica would sit here while an idle one could run it, and outlive its ack wait. A batch
  // handler pulls up to a batch per lane ahead of its workers, so the next run is already here
  // when a transaction commits (queued messages are kept alive, see `keepAlive`).
  const pullLimit = batch ? Math.max(maxBatch, 16) * laneCount : concurrency;
  const pullSize = () =>
    batch ? Math.max(1, pullLimit - queued) : Math.max(1, concurrency - busy - queued);
  /** Idle workers by lane (one shared lane without batches). */
  const idleWorkers: (() => void)[][] = lanes.map(() => []);
  /** What the workers are handling now, in the order they took it. */
  const handlingNow = new Set<{ msgs: JsMsg[]; sinceMs: number }>();
  let busy = 0;
  let stopping = false;
  let fetcherWaiting: (() => void) | undefined;
  /** Overdue pulls still being taken from (see FETCH_OVERDUE_MS), awaited by `stop`. */
  const overduePulls = new Set<Promise<void>>();
  let keepAlive: NodeJS.Timeout | undefined;
  /** When the broker last heard of each held message: its delivery, or its last heartbeat. */
  const heardOf = new WeakMap<JsMsg, number>();
  let markReady!: () => void;
  let failStart!: (err: unknown) => void;
  let started = false;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = () => {
      started = true;
      resolve();
    };
    failStart = reject;
  });
  // A caller that never awaits `ready` must not turn a failed start into an unhandled rejection.
  ready.catch(() => undefined);

  const laneOf = (msg: JsMsg): number => {
    if (laneCount === 1) return 0;
    const key = laneKey(msg.subject);
    let h = 0;
    for (let i = 0; i < key.length; i++) h = (Math.imul(h, 31) + key.charCodeAt(i)) | 0;
    return (h >>> 0) % laneCount;
  };
  const wakeWorker = (lane: number) => idleWorkers[lane]!.shift()?.();
  const endLinger = (lane: Lane) => {
    const wake = lane.lingering;
    lane.lingering = undefined;
    wake?.();
  };
  const wakeFetcher = () => {
    const wake = fetcherWaiting;
    fetcherWaiting = undefined;
    wake?.();
  };
  /** Whether the pull loop must wait before pulling again. */
  const fetcherBlocked = () => (batch ? queued >= pullLimit : queued > 0 || busy >= concurrency);

  // Workers take from local queues that the pull loop fills without waiting for them, so a slow
  // handler never stalls the pull's iterator (nats.js fails a pull whose heartbeats go unread). The
  // next pull starts once there is room (a free worker; with batches, less than a batch per lane
  // queued) and asks for no more messages than that, which bounds what is held.
  const work = async (settlement: Settlement, index: number): Promise<void> => {
    const laneIndex = batch ? index : 0;
    const lane = lanes[laneIndex]!;
    for (;;) {
      if (lingerMs > 0 && lane.msgs.length > 0 && lane.msgs.length < maxBatch && !stopping) {
        const left = lingerMs - (now() - lane.oldestStoredAt);
        if (left > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => endLinger(lane), left);
            lane.lingering = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          continue;
        }
      }
      if (lane.applying) {
        // Another lane's worker took this lane's queue into its run: wait until it is applied.
        await new Promise<void>((resolve) => idleWorkers[laneIndex]!.push(resolve));
        continue;
      }
      let taken = lane.msgs.splice(0, maxBatch);
      // Stored within a linger or two: light load, not a backlog (see `mergeIdleLanes`).
      const fresh =
        lingerMs > 0 && lane.oldestStoredAt > 0 && now() - lane.oldestStoredAt <= 2 * lingerMs;
      // What is left over has waited already: it goes in the next run without lingering again.
      lane.oldestStoredAt = 0;
      if (!taken.length) {
        if (stopping) return;
        wakeFetcher();
        await new Promise<void>((resolve) => idleWorkers[laneIndex]!.push(resolve));
        continue;
      }
      // Lanes have a worker each; without lanes, workers share the one queue and hold nothing.
      const held = laneCount > 1 ? [lane] : [];
      if (laneCount > 1 && fresh && taken.length < maxBatch)
        taken = mergeIdleLanes(lane, taken, held);
      queued -= taken.length;
      for (const h of held) h.applying = true;
      if (!fetcherBlocked()) wakeFetcher();
      busy++;
      try {
        await handleRun(settlement, taken);
      } finally {
        busy--;
        for (const h of held) h.applying = false;
        for (const h of held) if (h !== lane) wakeWorker(lanes.indexOf(h));
      }
    }
  };
  /**
   * One run of messages through the handler, in a frame of its own: what it decoded and handled
   * is garbage once it returns, where a worker's own frame keeps its last values while it waits
   * (a message, its event, its headers — kept alive for as long as the worker idles, each outlived
   * the young generation's collections and was copied by them, then promoted; 2026-12-07).
   */
  const handleRun = async (settlement: Settlement, taken: JsMsg[]): Promise<void> => {
    const handling = { msgs: taken, sinceMs: Date.now() };
    handlingNow.add(handling);
    try {
      if (batch && taken.length > 1) await processBatch(settlement, batch, taken);
      else {
        const msg = taken[0]!;
        const event = await verifiedEvent(settlement, msg);
        if (event !== undefined) await processOne(settlement, msg, event);
      }
    } catch (err) {
      options.onError?.(err);
    } finally {
      handlingNow.delete(handling);
    }
  };
  /**
   * Light load: a lane whose linger ended with less than a batch of fresh events takes along the
   * queues of the lanes that are only lingering (none of their keys is being applied), when all of
   * it fits in one batch — one transaction instead of one per lane, each of which costs the
   * database and this event loop a commit. Each key's events stay in stream order (every older one
   * of theirs is applied, and the run is in stream order); the lanes taken along are held until it
   * is applied. A backlog (events stored long before) is applied in lanes side by side as before.
   */
  const mergeIdleLanes = (own: Lane, taken: JsMsg[], held: Lane[]): JsMsg[] => {
    const others = lanes.filter((l) => l !== own && !l.applying && l.msgs.length > 0);
    let total = taken.length;
    for (const l of others) total += l.msgs.length;
    if (!others.length || total > maxBatch) return taken;
    const merged = [...taken];
    for (const l of others) {
      merged.push(...l.msgs.splice(0));
      l.oldestStoredAt = 0;
      held.push(l);
      endLinger(l);
    }
    return merged.sort((a, b) => a.seq - b.seq);
  };
  const workers: Promise<void>[] = [];

  const loop = (async () => {
    const consumer: Consumer = await options.js.consumers.get(
      options.stream ?? options.subjects.journal.stream,
      options.consumer,
    );
    // `get` fetched the consumer's info; a max_deliver of -1 (or unset) never dead-letters.
    const { config } = await consumer.info(true);
    const maxDeliver = config.max_deliver ?? -1;
    const settlement = { ...options, maxDeliver: maxDeliver > 0 ? maxDeliver : Infinity };
    for (let i = 0; i < concurrency; i++) workers.push(work(settlement, i));
    // A message waiting here for a worker (a batch's tail, a message pulled as a worker was taken)
    // or being handled tells the broker it is in progress, so it is not redelivered to another
    // replica meanwhile: the ack wait can be short — what a crashed replica held comes back within
    // one ack wait — however long a handler runs.
    const ackWaitMs = config.ack_wait ? Number(config.ack_wait) / 1e6 : 30_000;
    // Each held message is heard of again within a third of the ack wait of its delivery (or of its
    // last heartbeat), as when every held message was told about at every third: two thirds of the
    // ack wait stay for a stalled event loop, and the executor's claim rule takes a redelivery for
    // a dead holder, so that margin is the at-most-once guarantee's. But one settled within two
    // ninths of it — most are — is never heartbeaten: a heartbeat for every held message at every
    // third was more of the broker's work than the acks themselves (a projection backlog holds
    // hundreds at a time, and the journal sent 6 per dispatch in a burst).
    const tickMs = Math.max(50, Math.floor(ackWaitMs / 9));
    const keepAliveOld = (msg: JsMsg, now: number) => {
      if (now - (heardOf.get(msg) ?? 0) < 2 * tickMs) return;
      heardOf.set(msg, now);
      msg.working();
    };
    keepAlive = setInterval(() => {
      const now = performance.now();
      for (const lane of lanes) for (const msg of lane.msgs) keepAliveOld(msg, now);
      for (const handling of handlingNow) for (const msg of handling.msgs) keepAliveOld(msg, now);
    }, tickMs);
    keepAlive.unref();
    markReady();
    /** Takes a pull's messages into the lanes until the pull ends. */
    const take = async (pulled: AsyncIterable<JsMsg>): Promise<void> => {
      for await (const msg of pulled) {
        if (stopping) {
          // Pulled after stop was asked for: hand it back at once for another replica.
          msg.nak();
          continue;
        }
        const index = laneOf(msg);
        const lane = lanes[index]!;
        // The linger counts from when the broker stored the event, not from when it was pulled:
        // the tail of a backlog was stored long ago and is folded at once.
        if (!lane.msgs.length) lane.oldestStoredAt = Math.min(now(), msg.info.timestampNanos / 1e6);
        lane.msgs.push(msg);
        heardOf.set(msg, performance.now());
        queued++;
        if (lane.msgs.length >= maxBatch) endLinger(lane);
        wakeWorker(index);
      }
    };
    while (!stopping) {
      try {
        const pulled = await consumer.fetch({
          max_messages: pullSize(),
          expires: FETCH_EXPIRES_MS,
        });
        // The next pull goes out when this one ends or once it is overdue (see FETCH_OVERDUE_MS),
        // whichever comes first; an overdue pull's late messages are still taken, in the
        // background, until it ends.
        let timer: NodeJS.Timeout | undefined;
        const overdue = new Promise<'overdue'>((resolve) => {
          timer = setTimeout(() => resolve('overdue'), FETCH_EXPIRES_MS + FETCH_OVERDUE_MS);
        });
        const taking = take(pulled);
        const first = await Promise.race([taking.then(() => 'ended' as const), overdue]).finally(
          () => clearTimeout(timer),
        );
        if (first === 'overdue') {
          const late = taking.catch((err: unknown) => {
            // Its heartbeats missed is how such a pull ends: the broker dropped it unannounced.
            if (!stopping && !isPullHeartbeatLost(err)) options.onError?.(err);
          });
          overduePulls.add(late);
          void late.finally(() => overduePulls.delete(late));
        }
      } catch (err) {
        if (stopping) break;
        options.onError?.(err);
        // A pull whose heartbeats stopped has already cost a second; a broker that is really gone
        // fails the next pull at once, which then waits.
        if (!isPullHeartbeatLost(err))
          await new Promise((resolve) => setTimeout(resolve, PULL_RETRY_MS));
      }
      while (!stopping && fetcherBlocked()) {
        await new Promise<void>((resolve) => (fetcherWaiting = resolve));
      }
    }
  })().catch((err) => {
    if (!started) failStart(err);
    else if (!stopping) options.onError?.(err);
  });

  return {
    ready,
    inFlight: () =>
      [...handlingNow].flatMap(({ msgs, sinceMs }) =>
        msgs.map((msg) => ({ subject: msg.subject, seq: msg.seq, sinceMs })),
      ),
    async stop() {
      stopping = true;
      for (const lane of lanes) endLinger(lane);
      wakeFetcher();
      await loop;
      await Promise.allSettled([...overduePulls]);
      // Messages already queued are still processed (they were pulled; handing them back would
      // only make another replica wait for them); idle workers are woken to see the stop.
      for (const [i, idle] of idleWorkers.entries()) while (idle.length) wakeWorker(i);
      await Promise.allSettled(workers);
      clearInterval(keepAlive);
    },
  };
}

/**
 * Applies a run of events in one call. Each message keeps its own consumer span (in its own trace);
 * a failure of the whole batch falls back to one message at a time, so only the bad one is nak'd
 * or dead-lettered.
 */
async function processBatch(
  options: Settlement,
  batch: BatchHandling,
  msgs: JsMsg[],
): Promise<void> {
  const items: { msg: JsMsg; event: JournalEvent | null }[] = [];
  for (let i = 0; i < msgs.length; i++) {
    // A run of hundreds of events is verified, parsed and checked in slices, with I/O let through
    // between them: in the all-in-one the dispatch path shares this event loop, and one synchronous
    // parse of a whole run held it for tens of milliseconds (a stall every call in flight waited out).
    if (i > 0 && i % DECODE_SLICE === 0)
      await new Promise<void>((resolve) => setImmediate(resolve));
    const msg = msgs[i]!;
    const event = await verifiedEvent(options, msg);
    if (event !== undefined) items.push({ msg, event });
  }
  const parsed = items.flatMap(({ msg, event }) => (event ? [{ msg, event }] : []));
  if (parsed.length) {
    const startedAt = performance.now();
    const applied = batch.handleBatch(
      parsed.map(({ msg, event }) => ({ event, seq: msg.seq, stream: msg.info.stream })),
    );
    try {
      await Promise.all(
        parsed.map(({ msg, event }) =>
          consumerSpan(msg.subject, headersOf(msg), spanAttributes(options, event), () => applied),
        ),
      );
    } catch {
      // One bad event fails the whole transaction: retry one at a time so only it is nak'd
      // (each already verified and parsed above: not checked a second time).
      for (const { msg, event } of items) await processOne(options, msg, event);
      return;
    }
    const seconds = (performance.now() - startedAt) / 1000 / parsed.length;
    for (const { msg, event } of parsed) {
      msg.ack();
      reportProcessed(options, event.type, 'ack', seconds);
    }
  }
  for (const { msg, event } of items) if (!event) await processOne(options, msg, null);
}

/**
 * The one check before a delivery is handled (`trustedEvent`): its event; `null` when it is signed
 * by its producer but is not an event this release reads (a poison message); `undefined` when it
 * was untrusted and has been refused (`refuseUntrusted`), so there is nothing left to do with it.
 */
async function verifiedEvent(
  options: Settlement,
  msg: JsMsg,
): Promise<JournalEvent | null | undefined> {
  const trusted = trustedEvent(options.keys, msg.subject, msg.data, headersOf(msg));
  if (trusted.ok) return trusted.event;
  if (trusted.reason === 'not-an-event') return null;
  await refuseUntrusted(options, msg, trusted.reason);
  return undefined;
}

/** Handles one verified message: `event` as {@link verifiedEvent} found it (`null`: poison). */
async function processOne(
  options: Settlement,
  msg: JsMsg,
  event: JournalEvent | null,
): Promise<void> {
  const startedAt = performance.now();
  const settled = (eventType: string, outcome: ProcessedOutcome) =>
    reportProcessed(options, eventType, outcome, (performance.now() - startedAt) / 1000);
  const deliveryCount = msg.info.deliveryCount;
  const lastAttempt = deliveryCount >= options.maxDeliver;
  if (!event) {
    await deadLetter(options, msg, null, {
      code: ErrorCode.PoisonMessage,
      message: 'message is not a journal event',
    });
    settled('unknown', 'dead-letter');
    return;
  }
  await consumerSpan(msg.subject, headersOf(msg), spanAttributes(options, event), async (span) => {
    let handedBack = false;
    try {
      await options.handle(event, {
        deliveryCount,
        seq: msg.seq,
        lastAttempt,
        working: () => msg.working(),
        handBack: () => {
          if (handedBack) return;
          handedBack = true;
          msg.nak();
        },
        msg,
      });
      if (handedBack) {
        settled(event.type, 'nak');
        return;
      }
      msg.ack();
      settled(event.type, 'ack');
    } catch (err) {
      // Settled here, not the loop's to report: a failure of the dead-lettering itself is.
      recordFailure(span, err);
      const wire = toWireError(err);
      span.setAttribute(Attr.ErrorCode, wire.code);
      if (handedBack) {
        // Given back already: another replica has it (never dead-lettered from here).
        settled(event.type, 'nak');
        return;
      }
      if (lastAttempt) {
        await deadLetter(options, msg, event, {
          code: ErrorCode.PoisonMessage,
          message: `gave up after ${deliveryCount} deliveries: ${wire.message}`,
          details: { cause: wire.code },
        });
        settled(event.type, 'dead-letter');
      } else {
        msg.nak(backoffFor(options.backoffMs, deliveryCount));
        settled(event.type, 'nak');
      }
    }
  });
}

/**
 * Dead-letters a message that is not signed for this service by a producer of its type: a copy
 * to the dead-letter stream with `Toolgate-Error-Code: unauthorized` and the reason, then `term`.
 * Unlike a poison message, nothing is settled for the dispatch its subject or payload names.
 */
async function refuseUntrusted(
  options: Settlement,
  msg: JsMsg,
  reason: UntrustedReason,
): Promise<void> {
  const headers = leanHeaders();
  headers.set('Toolgate-Original-Subject', msg.subject);
  headers.set('Toolgate-Original-Seq', String(msg.seq));
  headers.set('Toolgate-Error-Code', ErrorCode.Unauthorized);
  headers.set('Toolgate-Untrusted', reason);
  await options.js.publish(options.subjects.deadLetter.forRole(options.role), msg.data, {
    headers,
    msgID: `dlq:${options.consumer}:${msg.seq}`,
  });
  msg.term();
  try {
    options.onUntrusted?.(options.role, reason);
  } catch {
    // Metrics must not turn a refusal into a redelivery.
  }
  reportProcessed(options, 'untrusted', 'dead-letter', 0);
}

/** The attributes of a message's CONSUMER span. */
function spanAttributes(options: JournalConsumerOptions, event: JournalEvent) {
  return {
    [Attr.MessagingConsumerGroup]: options.consumer,
    [Attr.MessageId]: event.id,
    [Attr.Tenant]: event.tenant,
    [Attr.RunId]: event.runId,
    [Attr.DispatchId]: event.dispatchId,
  };
}

/** Tells `onProcessed` how a message was settled. */
function reportProcessed(
  options: JournalConsumerOptions,
  eventType: string,
  outcome: ProcessedOutcome,
  seconds: number,
): void {
  try {
    options.onProcessed?.(options.role, eventType, outcome, seconds);
  } catch {
    // A metrics hook must never turn an acked message into a nak.
  }
}

function backoffFor(backoffMs: number[] | undefined, deliveryCount: number): number | undefined {
  if (!backoffMs?.length) return undefined;
  return backoffMs[Math.min(deliveryCount, backoffMs.length) - 1];
}

async function deadLetter(
  options: JournalConsumerOptions,
  msg: JsMsg,
  event: JournalEvent | null,
  error: WireError,
): Promise<void> {
  const report: PoisonReport = {
    role: options.role,
    consumer: options.consumer,
    subject: msg.subject,
    seq: msg.seq,
    deliveryCount: msg.info.deliveryCount,
    event,
    error,
  };
  const headers = leanHeaders();
  headers.set('Toolgate-Original-Subject', msg.subject);
  headers.set('Toolgate-Original-Seq', String(msg.seq));
  headers.set('Toolgate-Error-Code', error.code);
  await options.js.publish(options.subjects.deadLetter.forRole(options.role), msg.data, {
    headers,
    msgID: `dlq:${options.consumer}:${msg.seq}`,
  });
  await options.onPoison?.(report);
  // No reason text: nats-server 2.9 only recognises a bare `+TERM` and ignores `+TERM <reason>`.
  // The reason is in the dead-letter copy's headers instead.
  msg.term();
}
