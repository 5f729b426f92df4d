import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Metrics, MetricName } from '@toolgate/service-kit';
import { parse } from 'yaml';

/**
 * The dashboards in deploy/grafana query only metrics that exist: Toolgate's own, as
 * libs/service-kit/src/metrics.ts names them, and the default process metrics its registry
 * collects. A renamed metric fails here instead of leaving an empty panel in production.
 */

const root = path.join(__dirname, '..', '..', '..');
const dashboardDir = path.join(root, 'deploy/grafana/dashboards');
const files = readdirSync(dashboardDir).filter((f) => f.endsWith('.json'));

interface Panel {
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: { expr?: string; query?: string; datasource?: { type: string; uid: string } }[];
  panels?: Panel[];
}

const flatten = (panels: Panel[]): Panel[] =>
  panels.flatMap((p) => [p, ...flatten(p.panels ?? [])]);

async function knownMetricNames(): Promise<Set<string>> {
  const metrics = new Metrics();
  metrics.collectApprovalsPending(async () => []);
  const names = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
  metrics.registry.clear();
  return names;
}

describe('Grafana dashboards (deploy/grafana)', () => {
  it('has the overview dashboard', () => {
    expect(files).toContain('toolgate-overview.json');
  });

  for (const file of files) {
    describe(file, () => {
      const dashboard = JSON.parse(readFileSync(path.join(dashboardDir, file), 'utf8')) as {
        uid: string;
        panels: Panel[];
      };
      const panels = flatten(dashboard.panels).filter((p) => p.type !== 'row');
      const exprs = panels.flatMap((p) =>
        (p.targets ?? []).map((t) => t.expr).filter((e): e is string => Boolean(e)),
      );

      it('queries only metric names the services define', async () => {
        const known = await knownMetricNames();
        const used = new Set(
          exprs.flatMap((e) =>
            [...e.matchAll(/\b((?:toolgate|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!),
          ),
        );
        expect(used.size).toBeGreaterThan(0);
        for (const name of used) {
          const base = name.replace(/_(bucket|sum|count)$/, '');
          expect([name, known.has(name) || known.has(base)]).toEqual([name, true]);
        }
      });

      it('charts every Toolgate metric: rates by outcome, latency p50/p99 per role, lag and pending approvals', () => {
        const all = exprs.join('\n');
        for (const name of Object.values(MetricName))
          expect([name, all.includes(name)]).toEqual([name, true]);
        expect(all).toMatch(
          /histogram_quantile\(0\.5,[^\n]*toolgate_message_processing_seconds_bucket[^\n]*\) by \(role, le\)\)/m,
        );
        expect(all).toMatch(
          /histogram_quantile\(0\.99,[^\n]*toolgate_message_processing_seconds_bucket[^\n]*\) by \(role, le\)\)/m,
        );
        expect(all).toMatch(/toolgate_messages_processed_total[^\n]*by \(outcome\)/);
      });

      it('uses only the provisioned data sources, including a Tempo trace search', () => {
        const provisioned = parse(
          readFileSync(
            path.join(root, 'deploy/grafana/provisioning/datasources/datasources.yaml'),
            'utf8',
          ),
        ) as {
          datasources: { uid: string; type: string }[];
        };
        const uids = new Map(provisioned.datasources.map((d) => [d.uid, d.type]));
        for (const p of panels) {
          for (const ds of [p.datasource, ...(p.targets ?? []).map((t) => t.datasource)]) {
            if (ds) expect([p.title, uids.get(ds.uid)]).toEqual([p.title, ds.type]);
          }
        }
        const traces = panels.filter((p) => p.datasource?.type === 'tempo');
        expect(traces.length).toBeGreaterThan(0);
        expect(traces[0]!.targets![0]!.query).toContain('toolgate-');
      });
    });
  }
});
