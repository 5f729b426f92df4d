import { BoundedLabel, Children, type Metrics, SECONDS_BUCKETS } from '@toolgate/service-kit';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { DispatchMeasurement } from '../projection/dispatch-measurements';

/**
 * The journal's metrics: what happened to dispatches, measured from the journal itself.
 *
 * The journal is the one service that sees every event, and its projection applies each stream
 * sequence once whichever replica folds it, so these are counted once per dispatch however many
 * replicas run — a counter in the gateway or the evaluator would miss what another edge or a
 * redelivery did, and one in every journal replica would count N times. The gauges read the
 * projection and the stream at scrape time: every replica reports the same number (dashboards take
 * `max`).
 */
export const JournalMetricName = {
  /** Dispatches settled, by outcome (ok, error, denied), error code, tenant and tool. */
  DispatchesSettled: 'toolgate_dispatches_settled_total',
  /** Verdicts, by verdict, deciding layer (decidedBy), the decisive rule's kind, tenant and tool. */
  Verdicts: 'toolgate_verdicts_total',
  /** Approvals resolved, by source (human, policy, timeout) and decision. */
  ApprovalsResolved: 'toolgate_approvals_resolved_total',
  /** Seconds from `suspended` to `resolved`, by source. */
  ApprovalWaitSeconds: 'toolgate_approval_wait_seconds',
  /** Seconds from `requested` to `settled`, by path (direct, approval) and outcome. */
  DispatchLatencySeconds: 'toolgate_dispatch_latency_seconds',
  /** Seconds between two stages of a dispatch, by hop. */
  DispatchHopSeconds: 'toolgate_dispatch_hop_seconds',
  /** Approvals waiting for a resolution, per tenant. */
  ApprovalsPending: 'toolgate_approvals_pending',
  /** Seconds until the earliest pending approval expires, per tenant (negative: overdue). */
  ApprovalsNextExpirySeconds: 'toolgate_approvals_next_expiry_seconds',
  /** Journal events in the stream the projection has not applied yet. */
  ProjectionLag: 'toolgate_projection_lag',
  /** Events folded per projection transaction. */
  ProjectionBatchSize: 'toolgate_projection_batch_size',
} as const;

/** Latencies of whole dispatches: milliseconds for a no-op call, up to a day for a parked one. */
const LATENCY_BUCKETS = [...SECONDS_BUCKETS, 60, 300, 900, 3600, 4 * 3600, 86_400];
/** Hops: the tool's run can take minutes. */
const HOP_BUCKETS = [...SECONDS_BUCKETS, 60, 120, 300];
/** Approval waits: a policy resolves at once, a person in minutes to hours, a timeout at its expiry. */
const WAIT_BUCKETS = [0.1, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 86_400];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128];

/** Pending approvals of one tenant (from the projection). */
export interface PendingApprovals {
  tenant: string;
  count: number;
  /** The earliest `expires_at` among them. */
  nextExpiry: Date;
}

/** What the scrape-time gauges read. */
export interface ProjectionSources {
  pendingApprovals(): Promise<readonly PendingApprovals[]>;
  /** The stream's last sequence and the highest one the projection applied. */
  positions(): Promise<{ streamSeq: number; appliedSeq: number }>;
  now(): Date;
  onError(err: unknown): void;
}

/** Pending approvals as labelled: `tenant` undefined when tenant labels are off. */
interface TenantApprovals {
  tenant: string | undefined;
  count: number;
  /** Seconds until the earliest expiry. */
  next: number;
}

/** Stands for an absent label in a child's key (no label value contains it). */
const NONE = '\u0001';

type Inc = { inc(): void };
type Observe = { observe(value: number): void };

export class JournalMetrics {
  private readonly settled: Children<Inc>;
  private readonly verdicts: Children<Inc>;
  private readonly resolved: Children<Inc>;
  private readonly wait: Children<Observe>;
  private readonly latency: Children<Observe>;
  private readonly hops: Children<Observe>;
  private readonly batchSize: Histogram;
  /**
   * The chain knows about ten rule kinds; the cap only guards the label against a chain bug or a
   * forged event, never a legitimate new kind.
   */
  private readonly ruleKind = new BoundedLabel(true, 32);

  constructor(private readonly metrics: Metrics) {
    const registers = [metrics.registry];
    const settled = new Counter({
      name: JournalMetricName.DispatchesSettled,
      help: 'Dispatches settled, by outcome (ok, error, denied), error code (the outcome for ok), tenant and tool; counted once per dispatch from the journal.',
      labelNames: ['outcome', 'code', 'tenant', 'tool'],
      registers,
    });
    this.settled = new Children((labels) => settled.labels(labels));
    const verdicts = new Counter({
      name: JournalMetricName.Verdicts,
      help: 'Verdicts of the permission chain, by verdict, deciding layer (decided_by), kind of the decisive rule, tenant and tool.',
      labelNames: ['verdict', 'decided_by', 'rule_kind', 'tenant', 'tool'],
      registers,
    });
    this.verdicts = new Children((labels) => verdicts.labels(labels));
    const resolved = new Counter({
      name: JournalMetricName.ApprovalsResolved,
      help: 'Approvals resolved, by source (human, policy, timeout) and decision (allow, deny).',
      labelNames: ['source', 'decision'],
      registers,
    });
    this.resolved = new Children((labels) => resolved.labels(labels));
    // Zero from the start, so an alert on timeouts sees the first one as an increase.
    for (const source of ['human', 'policy', 'timeout'])
      for (const decision of ['allow', 'deny']) resolved.inc({ source, decision }, 0);
    const wait = new Histogram({
      name: JournalMetricName.ApprovalWaitSeconds,
      help: 'Seconds a parked dispatch waited for its resolution (suspended to resolved), by source.',
      labelNames: ['source'],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.wait = new Children((labels) => wait.labels(labels));
    const latency = new Histogram({
      name: JournalMetricName.DispatchLatencySeconds,
      help: 'Seconds from requested to settled (event times), by path (direct; approval: parked for a resolution, wait included) and outcome.',
      labelNames: ['path', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.latency = new Children((labels) => latency.labels(labels));
    const hops = new Histogram({
      name: JournalMetricName.DispatchHopSeconds,
      help: 'Seconds between two stages of a dispatch (event times): requested-decided, decided-started (calls not parked), resolved-started, started-settled.',
      labelNames: ['hop'],
      buckets: HOP_BUCKETS,
      registers,
    });
    this.hops = new Children((labels) => hops.labels(labels));
    this.batchSize = new Histogram({
      name: JournalMetricName.ProjectionBatchSize,
      help: 'Journal events folded into the projection per transaction.',
      buckets: BATCH_BUCKETS,
      registers,
    });
  }

  /** Records what one committed projection transaction measured. */
  record(measurements: readonly DispatchMeasurement[], batchSize: number): void {
    this.batchSize.observe(batchSize);
    for (const m of measurements) {
      switch (m.kind) {
        case 'settled': {
          const tenant = this.metrics.tenant.value(m.tenant);
          const tool = m.tool === null ? undefined : this.metrics.tool.value(m.tool);
          this.settled
            .get(`${m.outcome}\0${m.code}\0${tenant}\0${tool ?? NONE}`, {
              outcome: m.outcome,
              code: m.code,
              tenant,
              tool,
            })
            .inc();
          break;
        }
        case 'verdict': {
          const tenant = this.metrics.tenant.value(m.tenant);
          const tool = m.tool === null ? undefined : this.metrics.tool.value(m.tool);
          const ruleKind = this.ruleKind.value(m.ruleKind)!;
          this.verdicts
            .get(`${m.verdict}\0${m.decidedBy}\0${ruleKind}\0${tenant}\0${tool ?? NONE}`, {
              verdict: m.verdict,
              decided_by: m.decidedBy,
              rule_kind: ruleKind,
              tenant,
              tool,
            })
            .inc();
          break;
        }
        case 'resolved':
          this.resolved
            .get(`${m.source}\0${m.decision}`, { source: m.source, decision: m.decision })
            .inc();
          break;
        case 'approval-wait':
          this.wait.get(m.source, { source: m.source }).observe(m.seconds);
          break;
        case 'hop':
          this.hops.get(m.hop, { hop: m.hop }).observe(m.seconds);
          break;
        case 'latency':
          this.latency
            .get(`${m.path}\0${m.outcome}`, { path: m.path, outcome: m.outcome })
            .observe(m.seconds);
          break;
      }
    }
  }

  /**
   * Registers the gauges read at scrape time: pending approvals and their next expiry per tenant,
   * and the projection's lag behind the stream. They are the journal's own state, so they are
   * exact after a restart, unlike anything kept in memory. A failed read keeps the last values;
   * the readiness probe reports the database and the broker.
   */
  collectFromProjection(sources: ProjectionSources): void {
    const registers = [this.metrics.registry];
    const tenantLabel = this.metrics.tenant;
    // Both approval gauges are filled from one query per scrape (prom-client collects metrics
    // concurrently, so the second collect joins the first one's query).
    let reading: Promise<readonly PendingApprovals[]> | undefined;
    const pending = () =>
      (reading ??= sources.pendingApprovals().finally(() => (reading = undefined)));
    const byTenant = async () => {
      const rows = await pending();
      const now = sources.now().getTime();
      const merged = new Map<string, TenantApprovals>();
      for (const row of rows) {
        const tenant = tenantLabel.value(row.tenant);
        const key = tenant ?? '';
        const seen = merged.get(key);
        const next = (row.nextExpiry.getTime() - now) / 1000;
        if (seen) {
          seen.count += row.count;
          seen.next = Math.min(seen.next, next);
        } else merged.set(key, { tenant, count: row.count, next });
      }
      return [...merged.values()];
    };
    const labelled = (tenant: string | undefined) => (tenant === undefined ? {} : { tenant });
    /** A gauge filled at scrape time; a failed read keeps its last values. */
    const scraped = (
      name: string,
      help: string,
      labelNames: string[],
      fill: (gauge: Gauge) => Promise<void>,
    ) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        async collect() {
          try {
            await fill(this);
          } catch (err) {
            sources.onError(err);
          }
        },
      });
    /** A per-tenant approval gauge, one series per tenant with pending approvals. */
    const perTenant = (name: string, help: string, value: (row: TenantApprovals) => number) =>
      scraped(name, help, ['tenant'], async (gauge) => {
        const rows = await byTenant();
        // Reset first: a tenant whose last approval was resolved must drop to no series, not stay.
        gauge.reset();
        for (const row of rows) gauge.set(labelled(row.tenant), value(row));
      });
    perTenant(
      JournalMetricName.ApprovalsPending,
      'Approvals waiting for a resolution, per tenant (journal projection, read at scrape).',
      (row) => row.count,
    );
    perTenant(
      JournalMetricName.ApprovalsNextExpirySeconds,
      'Seconds until the earliest pending approval of the tenant expires and its timeout decision applies (negative: overdue); no series without pending approvals.',
      (row) => row.next,
    );
    scraped(
      JournalMetricName.ProjectionLag,
      'Journal events in the stream the projection has not applied yet (stream last sequence minus the highest applied sequence, read at scrape).',
      [],
      async (gauge) => {
        const { streamSeq, appliedSeq } = await sources.positions();
        gauge.set(Math.max(0, streamSeq - appliedSeq));
      },
    );
  }
}
