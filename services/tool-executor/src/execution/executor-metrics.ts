import type { ExecutorKind } from '@toolgate/contracts';
import { Children, type Metrics, SECONDS_BUCKETS } from '@toolgate/service-kit';
import { Counter, Histogram } from 'prom-client';
import { REFUSALS, type Refusal } from './call-checks';
import type { ClaimOutcome } from './tool-runner';

/**
 * The tool-executor's metrics. Each is recorded by the replica that handled the delivery, and a
 * tool runs in one replica only (the claim), so a sum over replicas counts each run once.
 */
export const ExecutorMetricName = {
  /**
   * Claims on calls, by outcome: claimed, took-over (from a holder presumed gone), waited (for a
   * live holder), settled (found settled: the tool did not run).
   */
  ExecutorClaims: 'toolgate_executor_claims_total',
  /** Decisions refused because they do not match the recorded request, by reason. */
  ExecutorRefusals: 'toolgate_executor_refusals_total',
  /** Seconds a tool ran (from the claim to its outcome, retries included), by executor, tool and outcome. */
  ToolDurationSeconds: 'toolgate_tool_duration_seconds',
} as const;

const CLAIM_OUTCOMES: readonly ClaimOutcome[] = ['claimed', 'took-over', 'waited', 'settled'];
/** Tools run from a millisecond (a builtin) to minutes (a container or a remote worker). */
const TOOL_BUCKETS = [...SECONDS_BUCKETS, 60, 120, 300, 900];

export class ExecutorMetrics {
  private readonly claims = new Map<string, { inc(): void }>();
  private readonly refusals = new Map<string, { inc(): void }>();
  private readonly durations: Children<{ observe(value: number): void }>;

  constructor(private readonly metrics: Metrics) {
    const registers = [metrics.registry];
    const claims = new Counter({
      name: ExecutorMetricName.ExecutorClaims,
      help: 'Tool-executor claims on calls, by outcome (claimed, took-over, waited, settled).',
      labelNames: ['outcome'],
      registers,
    });
    const refusals = new Counter({
      name: ExecutorMetricName.ExecutorRefusals,
      help: 'Decisions the tool-executor refused to run (they do not match the recorded request), by reason.',
      labelNames: ['reason'],
      registers,
    });
    // Every series exists from the start at zero, so the first refusal is an increase an alert sees.
    for (const outcome of CLAIM_OUTCOMES) {
      claims.inc({ outcome }, 0);
      this.claims.set(outcome, claims.labels({ outcome }));
    }
    for (const reason of REFUSALS) {
      refusals.inc({ reason }, 0);
      this.refusals.set(reason, refusals.labels({ reason }));
    }
    const durations = new Histogram({
      name: ExecutorMetricName.ToolDurationSeconds,
      help: 'Seconds a tool ran in this executor (transient retries included), by executor kind, tool and outcome (ok, error).',
      labelNames: ['executor', 'tool', 'outcome'],
      buckets: TOOL_BUCKETS,
      registers,
    });
    this.durations = new Children((labels) => durations.labels(labels));
  }

  recordClaim(outcome: ClaimOutcome): void {
    this.claims.get(outcome)?.inc();
  }

  recordRefusal(reason: Refusal): void {
    this.refusals.get(reason)?.inc();
  }

  recordRun(executor: ExecutorKind, tool: string, outcome: 'ok' | 'error', seconds: number): void {
    const name = this.metrics.tool.value(tool);
    this.durations
      .get(`${executor}\0${name}\0${outcome}`, { executor, tool: name, outcome })
      .observe(seconds);
  }
}
