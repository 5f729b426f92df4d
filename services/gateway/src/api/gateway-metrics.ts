import { Children, type Metrics, SECONDS_BUCKETS } from '@toolgate/service-kit';
import { Counter, Histogram } from 'prom-client';

/**
 * The gateway's metrics: its API as callers see it, and what became of each submission. Counted
 * by the replica that served the request, so a sum over replicas counts each request once.
 */
export const GatewayMetricName = {
  /** API requests, by transport (http, nats), operation and status (`ok` or the error code). */
  ApiRequests: 'toolgate_api_requests_total',
  /** Seconds to answer an API request, by transport and operation. */
  ApiRequestSeconds: 'toolgate_api_request_seconds',
  /** Accepted dispatch submissions, by status (accepted: new; replayed: already journaled), tenant and tool. */
  DispatchSubmissions: 'toolgate_dispatch_submissions_total',
} as const;

/** A `dispatch.submit` with `wait` answers when the call settles, so requests can take long. */
const REQUEST_BUCKETS = [...SECONDS_BUCKETS, 60];

export type ApiTransport = 'http' | 'nats';

export class GatewayMetrics {
  private readonly requests: Children<{ inc(): void }>;
  private readonly durations: Children<{ observe(value: number): void }>;
  private readonly submissions: Children<{ inc(): void }>;

  constructor(private readonly metrics: Metrics) {
    const registers = [metrics.registry];
    const requests = new Counter({
      name: GatewayMetricName.ApiRequests,
      help: 'Gateway API requests, by transport (http, nats), operation and status (ok, or the error code answered).',
      labelNames: ['transport', 'operation', 'status'],
      registers,
    });
    this.requests = new Children((labels) => requests.labels(labels));
    const durations = new Histogram({
      name: GatewayMetricName.ApiRequestSeconds,
      help: 'Seconds to answer a gateway API request, by transport and operation (a dispatch.submit that waits includes the wait).',
      labelNames: ['transport', 'operation'],
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.durations = new Children((labels) => durations.labels(labels));
    const submissions = new Counter({
      name: GatewayMetricName.DispatchSubmissions,
      help: 'Dispatch submissions the gateway journaled (accepted) or found already journaled (replayed: the recorded outcome is returned, the tool does not run again), by tenant and tool.',
      labelNames: ['status', 'tenant', 'tool'],
      registers,
    });
    this.submissions = new Children((labels) => submissions.labels(labels));
  }

  recordRequest(transport: ApiTransport, operation: string, status: string, seconds: number): void {
    this.requests
      .get(`${transport}\0${operation}\0${status}`, { transport, operation, status })
      .inc();
    this.durations.get(`${transport}\0${operation}`, { transport, operation }).observe(seconds);
  }

  recordSubmission(status: 'accepted' | 'replayed', tenant: string, tool: string): void {
    const t = this.metrics.tenant.value(tenant);
    const name = this.metrics.tool.value(tool);
    this.submissions.get(`${status}\0${t}\0${name}`, { status, tenant: t, tool: name }).inc();
  }
}
