import { Server, type CustomTransportStrategy } from '@nestjs/microservices';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { lastValueFrom } from 'rxjs';
import { metricsFor } from './metrics';
import {
  JOURNAL_EVENT_TYPES,
  type ConsumerRole,
  type JournalEvent,
  type EventKeys,
  type Subjects,
} from '@toolgate/contracts';
import {
  ensureConsumer,
  ensureJournalStreams,
  runJournalConsumer,
  type BatchEntry,
  type DeliveryContext,
  type InFlightMessage,
  type JournalStreamOptions,
  type PoisonReport,
  type RunningConsumer,
} from '@toolgate/bus';

/** Delivery settings for one `@EventPattern(<event type>)` handler. */
export interface JetStreamHandlerOptions {
  concurrency?: number;
  /**
   * Hand the handler runs of up to this many events at once (in stream order, one at a time):
   * its payload is then always a `BatchEntry[]`, a single event being a batch of one.
   */
  batch?: number;
  /** With `batch`: how long a run may wait for more events (see `BatchHandling.lingerMs`). */
  batchLingerMs?: number;
  /** With `batch`: runs applied at once, in lanes by `laneKey` (see `BatchHandling.lanes`). */
  batchLanes?: number;
  /** With `batchLanes`: the key a message's lane is chosen by, from its subject. */
  laneKey?(subject: string): string;
  ackWaitMs?: number;
  maxDeliver?: number;
  backoffMs?: number[];
  maxAckPending?: number;
}

export interface JetStreamServerOptions {
  nc: NatsConnection;
  subjects: Subjects;
  role: ConsumerRole;
  /** The service's signing keys: every consumed event is verified with them. */
  keys: EventKeys;
  streams?: JournalStreamOptions;
  /** Per event type (the `@EventPattern` value); `'*'` subscribes to every journal event. */
  handlers?: Record<string, JetStreamHandlerOptions>;
  onPoison?(report: PoisonReport): Promise<void>;
  /** How often each consumer's lag is read from the broker for `/metrics` (default 15 s). */
  lagPollMs?: number;
}

/** What a handler receives as its second argument (`@Ctx()`). */
export type JetStreamEventContext = DeliveryContext;

/**
 * Redelivery delays after a failure when a handler sets none. The consumer's own limits (ack wait,
 * max deliver, max ack pending) default in `ensureConsumer`, and the loop reads them from the broker.
 */
const DEFAULT_BACKOFF_MS = [250, 1000, 5000, 15000];

/**
 * A NestJS transport over JetStream durable pull consumers. Each `@EventPattern('<event type>')`
 * handler gets its own durable consumer filtered on that event type (shared by all replicas of
 * the service), with explicit acks: the handler resolving acks, throwing naks with backoff, and the
 * last delivery dead-letters. Nest's built-in NATS transport is core NATS — nothing is acked or
 * redelivered — so it is not used for events.
 */
export class JetStreamServer extends Server implements CustomTransportStrategy {
  private readonly running: RunningConsumer[] = [];
  private js: JetStreamClient | undefined;
  private lagTimer: NodeJS.Timeout | undefined;
  private polledConsumers: string[] = [];
  private lagLabels: string[] = [];

  constructor(private readonly options: JetStreamServerOptions) {
    super();
  }

  async listen(callback: (err?: unknown) => void): Promise<void> {
    try {
      const { nc, subjects, role } = this.options;
      const jsm = await jetstreamManager(nc);
      const metrics = metricsFor(nc);
      const consumers: string[] = [];
      const polled: { stream: string; name: string; label: string }[] = [];
      await ensureJournalStreams(jsm, subjects, this.options.streams);
      this.js = jetstream(nc);
      // A partitioned journal: each handler's consumer on every partition's stream, each run by a
      // loop (and lane set) of its own, so the partitions are worked on side by side.
      for (const [eventType, handler] of this.messageHandlers) {
        const settings = this.options.handlers?.[eventType] ?? {};
        metrics.initConsumer(role, eventType === '*' ? JOURNAL_EVENT_TYPES : [eventType]);
        const untrusted = metrics.untrustedCounter(role);
        const invoke = async (payload: unknown, delivery?: DeliveryContext) => {
          const result = this.transformToObservable(await handler(payload, delivery));
          await lastValueFrom(result, { defaultValue: undefined });
        };
        for (const partition of subjects.journal.partitions) {
          const name = await ensureConsumer(jsm, subjects, {
            role,
            eventType,
            ackWaitMs: settings.ackWaitMs,
            maxDeliver: settings.maxDeliver,
            maxAckPending: settings.maxAckPending,
            partition: partition.index,
          });
          if (partition.index === 0) consumers.push(name);
          polled.push({
            stream: partition.stream,
            name,
            label: lagLabel(name, partition.index, subjects),
          });
          const consumer = runJournalConsumer({
            js: this.js,
            subjects,
            role,
            keys: this.options.keys,
            onUntrusted: (_role, reason) => untrusted(reason),
            consumer: name,
            stream: partition.stream,
            backoffMs: settings.backoffMs ?? DEFAULT_BACKOFF_MS,
            concurrency: settings.concurrency,
            handle: (event: JournalEvent, delivery: DeliveryContext) =>
              invoke(
                settings.batch
                  ? [{ event, seq: delivery.seq, stream: delivery.msg.info.stream }]
                  : event,
                delivery,
              ),
            ...(settings.batch
              ? {
                  batch: {
                    maxBatch: settings.batch,
                    ...(settings.batchLingerMs ? { lingerMs: settings.batchLingerMs } : {}),
                    ...(settings.batchLanes ? { lanes: settings.batchLanes } : {}),
                    ...(settings.laneKey ? { laneKey: settings.laneKey } : {}),
                    handleBatch: (entries: BatchEntry[]) => invoke(entries),
                  },
                }
              : {}),
            ...(this.options.onPoison ? { onPoison: this.options.onPoison } : {}),
            onError: (err) =>
              this.logger.error(`consumer ${role}/${eventType}: ${(err as Error)?.message ?? err}`),
            onProcessed: (r, type, outcome, seconds) =>
              metrics.recordProcessed(r, type, outcome, seconds),
          });
          this.running.push(consumer);
          await consumer.ready;
        }
      }
      // Lag is the broker's number, the same for every replica; polling it here (not per scrape)
      // bounds the JetStream API load to one request per consumer per interval per replica.
      const pollLag = async () => {
        for (const { stream, name, label } of polled) {
          try {
            const info = await jsm.consumers.info(stream, name);
            metrics.setConsumerLag(label, {
              pending: info.num_pending,
              ackPending: info.num_ack_pending,
              redelivered: info.num_redelivered,
              ackFloor: info.ack_floor.stream_seq,
            });
          } catch {
            // Broker unreachable or consumer gone: keep the last value; readiness reports NATS.
          }
        }
      };
      await pollLag();
      this.lagTimer = setInterval(() => void pollLag(), this.options.lagPollMs ?? 15_000);
      this.lagTimer.unref();
      this.polledConsumers = consumers;
      this.lagLabels = polled.map((p) => p.label);
      callback();
    } catch (err) {
      callback(err);
    }
  }

  /** Stops pulling and waits for in-flight handlers; the connection is drained by its owner. */
  async close(): Promise<void> {
    clearInterval(this.lagTimer);
    this.polledConsumers = [];
    for (const label of this.lagLabels.splice(0)) metricsFor(this.options.nc).forgetConsumer(label);
    // Still listed while they stop, so `inFlight` says what the stop waits for.
    await Promise.all(this.running.map((c) => c.stop()));
    this.running.length = 0;
  }

  /**
   * The durable consumers this service pulls from (known once it listens). A partitioned journal
   * has each of them on every partition's stream, under the same name.
   */
  consumers(): readonly string[] {
    return this.polledConsumers;
  }

  /** The messages this service's handlers are working on now. */
  inFlight(): InFlightMessage[] {
    return this.running.flatMap((c) => c.inFlight());
  }

  on(): never {
    throw new Error('JetStreamServer does not emit transport events');
  }

  unwrap<T>(): T {
    return this.options.nc as T;
  }
}

/**
 * The `consumer` label of a consumer's lag gauges: its name, and on a partitioned journal the
 * partition after it (`<name>@<partition>`), each partition's consumer having lag of its own.
 */
function lagLabel(name: string, partition: number, subjects: Subjects): string {
  return subjects.journal.partitionCount > 1 ? `${name}@${partition}` : name;
}
