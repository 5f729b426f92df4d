import { Controller, Get, Header, Inject } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ProcessedOutcome } from '@toolgate/bus';
import { UntrustedReason } from '@toolgate/contracts';
import {
  BoundedLabel,
  Children,
  DEFAULT_METRICS_SETTINGS,
  type MetricsSettings,
} from './metric-labels';

/**
 * The metric names every service may report: its consumers' and its process's. Each service's own
 * metrics (the gateway's API, the journal's dispatch outcomes and latencies, the executor's claims
 * and tool runs) are defined beside it and registered only in its registry. The dashboards and
 * alert rules in deploy/ are checked against a live scrape, so a renamed metric fails a test
 * instead of silently emptying a panel.
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
  /** Messages delivered more than once and not acked yet (the broker's `num_redelivered`). */
  ConsumerRedelivered: 'toolgate_consumer_redelivered',
  /** The stream sequence below which the consumer has acked everything; stuck = stalled. */
  ConsumerAckFloor: 'toolgate_consumer_ack_floor',
  /** NATS connections this service holds open. */
  NatsConnections: 'toolgate_nats_connections',
  /**
   * Messages refused because they were not signed by their producer, by where they were read
   * (a consumer role, `read`, `wait`, `whatif`, `fold`, `request`) and why (`UntrustedReason`).
   */
  UntrustedEvents: 'toolgate_untrusted_events_total',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

/**
 * Buckets from 1 ms to 30 s: a no-op dispatch step is ~1 ms, a shell tool or a remote hook can take
 * seconds, and ack wait (30 s by default) bounds everything that is not redelivered.
 */
export const SECONDS_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

const PROCESSED_OUTCOMES: readonly ProcessedOutcome[] = ['ack', 'nak', 'dead-letter'];

/** The broker's numbers for one durable consumer (`consumers.info`). */
export interface ConsumerLag {
  pending: number;
  ackPending: number;
  redelivered: number;
  ackFloor: number;
}

/** What the consumer loop records; registered on first use, so a service without one prints none. */
class ConsumerMetrics {
  readonly processed: Counter<'role' | 'event' | 'outcome'>;
  readonly processing: Histogram<'role' | 'event'>;
  readonly lag: Record<keyof ConsumerLag, Gauge<'consumer'>>;
  private readonly processedChildren: Children<{ inc(): void }>;
  private readonly processingChildren: Children<{ observe(v: number): void }>;

  constructor(registry: Registry) {
    this.processed = new Counter({
      name: MetricName.MessagesProcessed,
      help: 'Journal messages settled by a consumer, by role, event type and outcome (ack, nak, dead-letter).',
      labelNames: ['role', 'event', 'outcome'],
      registers: [registry],
    });
    this.processing = new Histogram({
      name: MetricName.MessageProcessingSeconds,
      help: 'Seconds from a journal message reaching the consumer loop to its settlement.',
      labelNames: ['role', 'event'],
      buckets: SECONDS_BUCKETS,
      registers: [registry],
    });
    const gauge = (name: string, help: string) =>
      new Gauge({ name, help, labelNames: ['consumer'], registers: [registry] });
    this.lag = {
      pending: gauge(
        MetricName.ConsumerPending,
        'Stream messages the durable consumer has not delivered yet (polled from the broker).',
      ),
      ackPending: gauge(
        MetricName.ConsumerAckPending,
        'Messages delivered by the durable consumer and not acknowledged yet (polled from the broker).',
      ),
      redelivered: gauge(
        MetricName.ConsumerRedelivered,
        'Messages the durable consumer delivered more than once and that are not acknowledged yet (polled from the broker).',
      ),
      ackFloor: gauge(
        MetricName.ConsumerAckFloor,
        'Stream sequence up to which the durable consumer has acknowledged every message (polled from the broker); a floor that stops moving while messages are pending is a stalled consumer.',
      ),
    };
    this.processedChildren = new Children((labels) => this.processed.labels(labels));
    this.processingChildren = new Children((labels) => this.processing.labels(labels));
  }

  /** Zero series for every settlement of these event types, so the first dead letter is an increase. */
  init(role: string, events: readonly string[]): void {
    for (const event of events)
      for (const outcome of PROCESSED_OUTCOMES) this.processed.inc({ role, event, outcome }, 0);
  }

  record(role: string, event: string, outcome: ProcessedOutcome, seconds: number): void {
    this.processedChildren.get(`${role}\0${event}\0${outcome}`, { role, event, outcome }).inc();
    this.processingChildren.get(`${role}\0${event}`, { role, event }).observe(seconds);
  }
}

/**
 * One service's Prometheus registry: default process metrics (heap, event-loop lag, …), its NATS
 * connections, its consumers' metrics when it has consumers, and whatever the service registers in
 * `registry` itself. Each service has a registry of its own (not prom-client's global one) so the
 * five services of the all-in-one process each report only their own series on their own `/metrics`.
 */
export class Metrics {
  readonly registry = new Registry();
  /** The `tenant` label: kept or dropped, capped (see `MetricsSettings`). */
  readonly tenant: BoundedLabel;
  /** The `tool` label: kept or dropped, capped. */
  readonly tool: BoundedLabel;
  private consumerMetrics: ConsumerMetrics | undefined;
  private readonly connections = new Set<NatsConnection>();
  private readonly untrusted: Counter<'role' | 'reason'>;

  constructor(readonly settings: MetricsSettings = DEFAULT_METRICS_SETTINGS) {
    collectDefaultMetrics({ register: this.registry });
    this.tenant = new BoundedLabel(settings.labels.includes('tenant'), settings.labelCap);
    this.tool = new BoundedLabel(settings.labels.includes('tool'), settings.labelCap);
    this.untrusted = new Counter({
      name: MetricName.UntrustedEvents,
      help: 'Journal events and internal requests refused because they were not signed by an identity that may produce them, by where they were read and why.',
      labelNames: ['role', 'reason'],
      registers: [this.registry],
    });
    const connections = this.connections;
    new Gauge({
      name: MetricName.NatsConnections,
      help: 'NATS connections this service holds open (counted at scrape).',
      registers: [this.registry],
      collect() {
        let open = 0;
        for (const nc of connections) if (!nc.isClosed()) open++;
        this.set(open);
      },
    });
  }

  /** Counts `nc` among the service's open connections (until it closes). */
  trackConnection(nc: NatsConnection): void {
    this.connections.add(nc);
  }

  private consumers(): ConsumerMetrics {
    return (this.consumerMetrics ??= new ConsumerMetrics(this.registry));
  }

  /** Called when a consumer starts: its settlements of `events` start at zero. */
  initConsumer(role: string, events: readonly string[]): void {
    this.consumers().init(role, events);
  }

  /** Called by the consumer loop once per settled message. */
  recordProcessed(role: string, event: string, outcome: ProcessedOutcome, seconds: number): void {
    this.consumers().record(role, event, outcome, seconds);
  }

  /**
   * Counts the messages `role` refuses as untrusted (`role`: a consumer role or where it was read)
   * by reason. Every reason's series starts at zero now, so the first refusal is an increase (the
   * `ToolgateUntrustedMessages` alert): call it once per role, where its reader is set up.
   */
  untrustedCounter(role: string): (reason: UntrustedReason) => void {
    for (const reason of Object.values(UntrustedReason)) this.untrusted.inc({ role, reason }, 0);
    return (reason) => this.untrusted.inc({ role, reason });
  }

  /** The broker's view of a durable consumer; every replica reports the same value. */
  setConsumerLag(consumer: string, lag: ConsumerLag): void {
    const gauges = this.consumers().lag;
    for (const key of Object.keys(gauges) as (keyof ConsumerLag)[])
      gauges[key].set({ consumer }, lag[key]);
  }

  /** Drops a consumer's series when this replica stops following it, so no stale lag lingers. */
  forgetConsumer(consumer: string): void {
    for (const gauge of Object.values(this.consumers().lag)) gauge.remove({ consumer });
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

/**
 * The `Metrics` of the service that owns `nc`, created on first use (with `settings`, which the
 * service's bootstrap passes first) and counting `nc` among its connections.
 */
export function metricsFor(nc: NatsConnection, settings?: MetricsSettings): Metrics {
  let metrics = byConnection.get(nc);
  if (!metrics) {
    metrics = new Metrics(settings);
    metrics.trackConnection(nc);
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
