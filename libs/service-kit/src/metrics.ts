import { Controller, Get, Header, Inject } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ProcessedOutcome } from '@toolgate/bus';

/**
 * Every metric name Toolgate defines. The Grafana dashboard and the deploy tests read this object,
 * so a renamed metric breaks a test instead of silently emptying a panel.
 */
export const MetricName = {
  /** Journal messages a consumer settled, by consumer role, event type and settlement. */
  MessagesProcessed: 'toolgate_messages_processed_total',
  /** Time from a message's arrival in the consumer loop to its settlement. */
  MessageProcessingSeconds: 'toolgate_message_processing_seconds',
  /** Messages of the stream the durable consumer has not delivered yet (lag). */
  ConsumerPending: 'toolgate_consumer_pending',
  /** Messages delivered to the consumer and not acked yet. */
  ConsumerAckPending: 'toolgate_consumer_ack_pending',
  /** Approvals waiting for a human, from the journal's projection. */
  ApprovalsPending: 'toolgate_approvals_pending',
  /**
   * The tool-executor's claims on calls, by outcome: claimed, took-over (from a holder presumed
   * gone), waited (for a live holder), settled (found settled: the tool did not run).
   */
  ExecutorClaims: 'toolgate_executor_claims_total',
  /** Decisions the tool-executor refused because they do not match the recorded request, by reason. */
  ExecutorRefusals: 'toolgate_executor_refusals_total',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

/** Pending approvals per tenant, as the journal's projection counts them. */
export type ApprovalsPendingSource = () => Promise<readonly { tenant: string; count: number }[]>;

// Buckets from 1 ms to 30 s: a no-op dispatch step is ~1 ms, a shell tool or a remote hook can take
// seconds, and ack wait (30 s by default) bounds everything that is not redelivered.
const PROCESSING_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/**
 * One service's Prometheus registry: default process metrics plus Toolgate's own. Each service has
 * a registry of its own (not prom-client's global one) so the five services of the all-in-one
 * process each report only their own consumers on their own `/metrics`.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly processed: Counter<'role' | 'event' | 'outcome'>;
  private readonly processing: Histogram<'role' | 'event'>;
  private readonly pending: Gauge<'consumer'>;
  private readonly ackPending: Gauge<'consumer'>;
  private approvalsPending: Gauge<'tenant'> | undefined;
  private readonly claims: Counter<'outcome'>;
  private readonly refusals: Counter<'reason'>;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.processed = new Counter({
      name: MetricName.MessagesProcessed,
      help: 'Journal messages settled by a consumer, by role, event type and outcome (ack, nak, dead-letter).',
      labelNames: ['role', 'event', 'outcome'],
      registers: [this.registry],
    });
    this.processing = new Histogram({
      name: MetricName.MessageProcessingSeconds,
      help: 'Seconds from a journal message reaching the consumer loop to its settlement.',
      labelNames: ['role', 'event'],
      buckets: PROCESSING_BUCKETS,
      registers: [this.registry],
    });
    this.pending = new Gauge({
      name: MetricName.ConsumerPending,
      help: 'Stream messages the durable consumer has not delivered yet (polled from the broker).',
      labelNames: ['consumer'],
      registers: [this.registry],
    });
    this.claims = new Counter({
      name: MetricName.ExecutorClaims,
      help: 'Tool-executor claims on calls, by outcome (claimed, took-over, waited, settled).',
      labelNames: ['outcome'],
      registers: [this.registry],
    });
    this.refusals = new Counter({
      name: MetricName.ExecutorRefusals,
      help: 'Decisions the tool-executor refused to run (they do not match the recorded request), by reason.',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    this.ackPending = new Gauge({
      name: MetricName.ConsumerAckPending,
      help: 'Messages delivered by the durable consumer and not acknowledged yet (polled from the broker).',
      labelNames: ['consumer'],
      registers: [this.registry],
    });
  }

  /** Called by the consumer loop once per settled message. */
  recordProcessed(role: string, event: string, outcome: ProcessedOutcome, seconds: number): void {
    this.processed.inc({ role, event, outcome });
    this.processing.observe({ role, event }, seconds);
  }

  /** Called by the tool-executor once per delivery that reached its claim. */
  recordClaim(outcome: string): void {
    this.claims.inc({ outcome });
  }

  /** Called by the tool-executor for every decision it refused to run. */
  recordRefusal(reason: string): void {
    this.refusals.inc({ reason });
  }

  /** The broker's view of a durable consumer; every replica reports the same value. */
  setConsumerLag(consumer: string, pending: number, ackPending: number): void {
    this.pending.set({ consumer }, pending);
    this.ackPending.set({ consumer }, ackPending);
  }

  /** Drops a consumer's series when this replica stops following it, so no stale lag lingers. */
  forgetConsumer(consumer: string): void {
    this.pending.remove({ consumer });
    this.ackPending.remove({ consumer });
  }

  /**
   * Registers the pending-approvals gauge, refreshed from `source` at every scrape (the journal
   * service owns the projection it counts). Only the journal calls this, so the series exists in
   * one service and a sum over instances does not double count.
   */
  collectApprovalsPending(source: ApprovalsPendingSource, onError?: (err: unknown) => void): void {
    if (this.approvalsPending) throw new Error('approvals pending gauge is already registered');
    this.approvalsPending = new Gauge({
      name: MetricName.ApprovalsPending,
      help: 'Approvals waiting for a resolution, per tenant (journal projection).',
      labelNames: ['tenant'],
      registers: [this.registry],
      async collect() {
        try {
          const rows = await source();
          // Reset first: a tenant whose last approval was resolved must drop to no series, not stay.
          this.reset();
          for (const row of rows) this.set({ tenant: row.tenant }, row.count);
        } catch (err) {
          // A failed count keeps the previous values; the readiness probe reports the database.
          onError?.(err);
        }
      },
    });
  }

  /** The exposition text of every metric in this registry. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}

// The JetStream transport is constructed by `bootstrapService` outside Nest's container, and the
// only thing it shares with `BusModule` is the service's NATS connection; keying the registry by
// that connection hands both the same `Metrics` without widening the bootstrap's API.
const byConnection = new WeakMap<NatsConnection, Metrics>();

/** The `Metrics` of the service that owns `nc`, created on first use. */
export function metricsFor(nc: NatsConnection): Metrics {
  let metrics = byConnection.get(nc);
  if (!metrics) {
    metrics = new Metrics();
    byConnection.set(nc, metrics);
  }
  return metrics;
}

/** `GET /metrics`: Prometheus exposition format, unauthenticated like the health probes. */
@Controller()
export class MetricsController {
  constructor(@Inject(Metrics) private readonly metrics: Metrics) {}

  @Get('metrics')
  @Header('content-type', Registry.PROMETHEUS_CONTENT_TYPE)
  @Header('cache-control', 'no-store')
  scrape(): Promise<string> {
    return this.metrics.render();
  }
}
