import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { dashboards, panelsOf, REPO_ROOT } from './observability-queries';
import { selectorsOf } from './promql';

/**
 * The dashboards in deploy/grafana, read as Grafana and Prometheus would: every query parses with
 * Prometheus's own grammar and selects Toolgate's or the Node.js client's metrics, every data
 * source is provisioned. That each selected series exists with values in a real scrape is
 * `metrics-endpoint.int.spec.ts`'s job.
 */

const all = dashboards();

describe('Grafana dashboards (deploy/grafana)', () => {
  it('has the overview dashboard', () => {
    expect(all.map((d) => d.file)).toContain('toolgate-overview.json');
  });

  it('is described panel by panel, row by row, in docs/deploy.md under "What the dashboards show"', () => {
    const doc = readFileSync(path.join(REPO_ROOT, 'docs/deploy.md'), 'utf8');
    const start = doc.indexOf('\n## What the dashboards show\n');
    expect(start).toBeGreaterThan(-1);
    const end = doc.indexOf('\n## ', start + 1);
    const section = doc.slice(start, end === -1 ? undefined : end);
    const described = [...section.matchAll(/\*\*([^*]+)\*\*/g)]
      .map((m) => m[1]!.replace(/\s+/g, ' '))
      .filter((t) => !['journal', 'gateway', 'executor'].includes(t));
    const rows = [...section.matchAll(/^### (.+)$/gm)].map((m) => m[1]!);
    const titles = all.flatMap((d) => panelsOf(d).map((p) => p.title));
    const rowTitles = all.flatMap((d) =>
      d.panels.filter((p) => p.type === 'row').map((p) => p.title),
    );
    expect(described.sort()).toEqual([...titles].sort());
    expect(rows).toEqual(rowTitles);
  });

  for (const dashboard of all) {
    describe(dashboard.file, () => {
      const panels = panelsOf(dashboard);

      it('gives every panel its own title and a description of what it shows', () => {
        const titles = panels.map((p) => p.title);
        expect(new Set(titles).size).toBe(titles.length);
        for (const p of panels)
          expect([p.title, (p.description ?? '').length > 20]).toEqual([p.title, true]);
      });

      it('queries Prometheus in valid PromQL, only for metrics the services export', () => {
        const exprs = panels.flatMap((p) =>
          (p.targets ?? []).flatMap((t) => (t.expr ? [{ title: p.title, expr: t.expr }] : [])),
        );
        expect(exprs.length).toBeGreaterThan(20);
        for (const { title, expr } of exprs) {
          const selectors = selectorsOf(expr);
          expect([title, selectors.length > 0]).toEqual([title, true]);
          for (const s of selectors)
            expect([title, s.metric]).toEqual([
              title,
              expect.stringMatching(/^(toolgate|process|nodejs)_/),
            ]);
        }
      });

      it('rejects a query Prometheus would not parse (the check can fail)', () => {
        expect(() => selectorsOf('sum(rate(toolgate_x[$__rate_interval])')).toThrow(/syntax error/);
        expect(() => selectorsOf('{__name__="toolgate_x"}')).toThrow(/without a metric name/);
      });

      it('uses only the provisioned data sources, including a Tempo trace search', () => {
        const provisioned = parse(
          readFileSync(
            path.join(REPO_ROOT, 'deploy/grafana/provisioning/datasources/datasources.yaml'),
            'utf8',
          ),
        ) as { datasources: { uid: string; type: string }[] };
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
