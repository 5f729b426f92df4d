import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { dashboards, panelsOf, REPO_ROOT, RULES_DIR, ruleFiles } from './observability-queries';
import { selectorsOf, withGrafanaVariables } from './promql';

/**
 * Runs Prometheus's own `promtool` (Debian `prometheus`; .ci/run installs it). Missing, it fails
 * the test saying so: these checks are not optional.
 */
function promtool(args: string[]): string {
  try {
    return execFileSync('promtool', args, { encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error('promtool is not installed (Debian: apt-get install prometheus)');
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/**
 * The alert rules in deploy/prometheus: valid PromQL over Toolgate's metrics, each with a
 * severity and a summary, loaded by the compose Prometheus and packaged for Kubernetes. That every
 * series they select exists with values is checked against a real scrape in
 * `metrics-endpoint.int.spec.ts`.
 */

const files = ruleFiles();
const rules = files.flatMap((f) => f.groups.flatMap((g) => g.rules));

describe('alert rules (deploy/prometheus)', () => {
  it('names every rule once and gives each a severity, a summary and a description', () => {
    expect(rules.length).toBeGreaterThan(0);
    const names = rules.map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const rule of rules) {
      expect([rule.alert, rule.labels?.severity]).toEqual([
        rule.alert,
        expect.stringMatching(/^(critical|warning|info)$/),
      ]);
      expect([
        rule.alert,
        Boolean(rule.annotations?.summary && rule.annotations.description),
      ]).toEqual([rule.alert, true]);
      if (rule.for !== undefined)
        expect([rule.alert, rule.for]).toEqual([rule.alert, expect.stringMatching(/^\d+[smh]$/)]);
    }
  });

  it('writes every expression in valid PromQL over Toolgate’s metrics', () => {
    for (const rule of rules) {
      const selectors = selectorsOf(rule.expr);
      expect([rule.alert, selectors.length > 0]).toEqual([rule.alert, true]);
      for (const s of selectors)
        expect([rule.alert, s.metric]).toEqual([rule.alert, expect.stringMatching(/^toolgate_/)]);
    }
  });

  it('alerts on settlement latency p99, dead letters, projection lag, approvals about to expire, a stalled consumer and untrusted messages', () => {
    const watching = (pattern: RegExp) =>
      rules.filter((r) => pattern.test(r.expr)).map((r) => r.alert);
    expect(
      watching(/histogram_quantile\(0\.99,[^]*toolgate_dispatch_latency_seconds_bucket/),
    ).toHaveLength(1);
    expect(watching(/toolgate_messages_processed_total\{outcome="dead-letter"\}/)).toHaveLength(1);
    expect(watching(/toolgate_projection_lag/)).toHaveLength(1);
    expect(watching(/toolgate_approvals_next_expiry_seconds/)).toHaveLength(1);
    expect(watching(/toolgate_consumer_ack_floor/)).toHaveLength(1);
    expect(watching(/increase\(toolgate_untrusted_events_total\[/)).toHaveLength(1);
  });

  it('passes promtool check rules, and so does every dashboard query as a recording rule (syntax and types)', () => {
    for (const { file } of files)
      expect(promtool(['check', 'rules', path.join(RULES_DIR, file)])).toMatch(/SUCCESS/);
    const exprs = dashboards().flatMap((d) =>
      panelsOf(d).flatMap((p) =>
        (p.targets ?? []).flatMap((t) => (t.expr ? [withGrafanaVariables(t.expr)] : [])),
      ),
    );
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgate-dashboard-rules-'));
    try {
      const file = path.join(dir, 'dashboards.rules.yml');
      const rules = (named: { record: string; expr: string }[]) =>
        writeFileSync(file, stringify({ groups: [{ name: 'dashboards', rules: named }] }));
      rules(exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })));
      expect(promtool(['check', 'rules', file])).toContain(`SUCCESS: ${exprs.length} rules found`);
      // The check can fail: a range vector where an instant one is needed is a type error.
      rules([{ record: 'bad:query', expr: 'sum(toolgate_projection_lag[5m]) > 1' }]);
      expect(() => promtool(['check', 'rules', file])).toThrow(/range vector/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fires each alert on the series that should raise it, and stays quiet on the rest (promtool test rules)', () => {
    expect(promtool(['test', 'rules', path.join(__dirname, 'alert-rules.promtool.yml')])).toMatch(
      /SUCCESS/,
    );
  });

  it('is loaded by the compose Prometheus from the mounted directory', () => {
    const prometheus = parse(
      readFileSync(path.join(REPO_ROOT, 'deploy/prometheus.yml'), 'utf8'),
    ) as {
      rule_files: string[];
    };
    const compose = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8')) as {
      services: Record<string, { volumes?: string[] }>;
    };
    const mounts = (compose.services.prometheus!.volumes ?? []).map((v) => v.split(':'));
    const rulesMount = mounts.find(([from]) => from === './deploy/prometheus');
    expect(rulesMount).toBeDefined();
    const target = rulesMount![1]!;
    for (const { file } of files) {
      const mounted = `${target}/${file}`;
      expect([
        file,
        prometheus.rule_files.some((glob) =>
          new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`).test(
            mounted,
          ),
        ),
      ]).toEqual([file, true]);
    }
  });

  it('is packaged for Kubernetes as a ConfigMap that deploy/k8s includes', () => {
    const k8s = parse(
      readFileSync(path.join(REPO_ROOT, 'deploy/k8s/kustomization.yaml'), 'utf8'),
    ) as {
      resources: string[];
    };
    expect(k8s.resources).toContain('../prometheus');
    const kustomization = parse(
      readFileSync(path.join(REPO_ROOT, 'deploy/prometheus/kustomization.yaml'), 'utf8'),
    ) as { configMapGenerator: { name: string; files: string[] }[] };
    const generated = kustomization.configMapGenerator.flatMap((g) => g.files);
    expect(generated.sort()).toEqual(files.map((f) => f.file).sort());
  });
});
