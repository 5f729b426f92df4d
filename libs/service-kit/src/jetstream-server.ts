import { Server, type CustomTransportStrategy } from '@nestjs/microservices';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { lastValueFrom } from 'rxjs';
import type { ConsumerRole, JournalEvent, Subjects } from '@toolgate/contracts';
import {
  consumerName,
  ensureConsumer,
  ensureJournalStreams,
  runJournalConsumer,
  type DeliveryContext,
  type JournalStreamOptions,
  type PoisonReport,
  type RunningConsumer,
} from '@toolgate/bus';

/** Delivery settings for one `@EventPattern(<event type>)` handler. */
export interface JetStreamHandlerOptions {
  concurrency?: number;
  ackWaitMs?: number;
  maxDeliver?: number;
  backoffMs?: number[];
  maxAckPending?: number;
}

export interface JetStreamServerOptions {
  nc: NatsConnection;
  subjects: Subjects;
  role: ConsumerRole;
  streams?: JournalStreamOptions;
  /** Per event type (the `@EventPattern` value); `'*'` subscribes to every journal event. */
  handlers?: Record<string, JetStreamHandlerOptions>;
  onPoison?(report: PoisonReport): Promise<void>;
}

/** What a handler receives as its second argument (`@Ctx()`). */
export type JetStreamEventContext = DeliveryContext;

const DEFAULTS: Required<Omit<JetStreamHandlerOptions, 'backoffMs'>> & { backoffMs: number[] } = {
  concurrency: 1,
  ackWaitMs: 30_000,
  maxDeliver: 5,
  backoffMs: [250, 1000, 5000, 15000],
  maxAckPending: 1000,
};

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

  constructor(private readonly options: JetStreamServerOptions) {
    super();
  }

  async listen(callback: (err?: unknown) => void): Promise<void> {
    try {
      const { nc, subjects, role } = this.options;
      const jsm = await jetstreamManager(nc);
      await ensureJournalStreams(jsm, subjects, this.options.streams);
      this.js = jetstream(nc);
      for (const [pattern, handler] of this.messageHandlers) {
        const eventType = pattern;
        const settings = { ...DEFAULTS, ...this.options.handlers?.[eventType] };
        await ensureConsumer(jsm, subjects, {
          role,
          eventType,
          ackWaitMs: settings.ackWaitMs,
          maxDeliver: settings.maxDeliver,
          maxAckPending: settings.maxAckPending,
        });
        const consumer = runJournalConsumer({
          js: this.js,
          subjects,
          role,
          consumer: consumerName(subjects, { role, eventType }),
          maxDeliver: settings.maxDeliver,
          backoffMs: settings.backoffMs,
          concurrency: settings.concurrency,
          handle: async (event: JournalEvent, delivery: DeliveryContext) => {
            const result = this.transformToObservable(await handler(event, delivery));
            await lastValueFrom(result, { defaultValue: undefined });
          },
          ...(this.options.onPoison ? { onPoison: this.options.onPoison } : {}),
          onError: (err) => this.logger.error(`consumer ${role}/${eventType}: ${(err as Error)?.message ?? err}`),
        });
        this.running.push(consumer);
        await consumer.ready;
      }
      callback();
    } catch (err) {
      callback(err);
    }
  }

  /** Stops pulling and waits for in-flight handlers; the connection is drained by its owner. */
  async close(): Promise<void> {
    await Promise.all(this.running.splice(0).map((c) => c.stop()));
  }

  on(): never {
    throw new Error('JetStreamServer does not emit transport events');
  }

  unwrap<T>(): T {
    return this.options.nc as T;
  }
}
