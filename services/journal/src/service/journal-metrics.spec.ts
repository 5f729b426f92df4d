import { Metrics } from '@toolgate/service-kit';
import type { DispatchMeasurement } from '../projection/dispatch-measurements';
import { JournalMetricName, JournalMetrics } from './journal-metrics';

const settled = (tenant: string, tool: string): DispatchMeasurement => ({
  kind: 'settled',
  tenant,
  tool,
  outcome: 'ok',
  code: 'ok',
});

async function seriesOf(metrics: Metrics, name: string) {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name)!;
  return metric.values.map((v) => ({ labels: v.labels, value: v.value }));
}

describe('JournalMetrics labels', () => {
  it('keeps tenants and tools up to the cap and counts the rest as other', async () => {
    const metrics = new Metrics({ labels: ['tenant', 'tool'], labelCap: 2 });
    const journal = new JournalMetrics(metrics);
    journal.record(
      [
        settled('a', 'x'),
        settled('b', 'y'),
        settled('c', 'z'),
        settled('a', 'z'),
        settled('d', 'x'),
      ],
      5,
    );
    expect(await seriesOf(metrics, JournalMetricName.DispatchesSettled)).toEqual(
      expect.arrayContaining([
        { labels: { outcome: 'ok', code: 'ok', tenant: 'a', tool: 'x' }, value: 1 },
        { labels: { outcome: 'ok', code: 'ok', tenant: 'b', tool: 'y' }, value: 1 },
        { labels: { outcome: 'ok', code: 'ok', tenant: 'other', tool: 'other' }, value: 1 },
        { labels: { outcome: 'ok', code: 'ok', tenant: 'a', tool: 'other' }, value: 1 },
        { labels: { outcome: 'ok', code: 'ok', tenant: 'other', tool: 'x' }, value: 1 },
      ]),
    );
    expect(await seriesOf(metrics, JournalMetricName.DispatchesSettled)).toHaveLength(5);
  });

  it('leaves tenant and tool out of every series when METRICS_LABELS=none', async () => {
    const metrics = new Metrics({ labels: [], labelCap: 50 });
    const journal = new JournalMetrics(metrics);
    journal.record([settled('a', 'x'), settled('b', 'y')], 2);
    expect(await seriesOf(metrics, JournalMetricName.DispatchesSettled)).toEqual([
      { labels: { outcome: 'ok', code: 'ok' }, value: 2 },
    ]);
  });

  it('sums pending approvals over the tenants past the cap, keeping the earliest expiry', async () => {
    const metrics = new Metrics({ labels: ['tenant'], labelCap: 1 });
    const journal = new JournalMetrics(metrics);
    const now = new Date('2026-01-01T00:00:00Z');
    const inSeconds = (s: number) => new Date(now.getTime() + s * 1000);
    journal.collectFromProjection({
      pendingApprovals: async () => [
        { tenant: 'a', count: 2, nextExpiry: inSeconds(600) },
        { tenant: 'b', count: 1, nextExpiry: inSeconds(300) },
        { tenant: 'c', count: 4, nextExpiry: inSeconds(900) },
      ],
      positions: async () => ({ streamSeq: 10, appliedSeq: 7 }),
      now: () => now,
      onError: (err) => {
        throw err;
      },
    });
    expect(await seriesOf(metrics, JournalMetricName.ApprovalsPending)).toEqual([
      { labels: { tenant: 'a' }, value: 2 },
      { labels: { tenant: 'other' }, value: 5 },
    ]);
    expect(await seriesOf(metrics, JournalMetricName.ApprovalsNextExpirySeconds)).toEqual([
      { labels: { tenant: 'a' }, value: 600 },
      { labels: { tenant: 'other' }, value: 300 },
    ]);
    expect(await seriesOf(metrics, JournalMetricName.ProjectionLag)).toEqual([
      { labels: {}, value: 3 },
    ]);
  });
});
