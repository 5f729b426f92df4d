import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

/**
 * Every PromQL query Toolgate ships: each Prometheus target of each panel of each dashboard in
 * deploy/grafana/dashboards, and each rule of each rule file in deploy/prometheus. Read from the
 * files themselves, so a new panel or rule is checked without being listed anywhere.
 */

export const REPO_ROOT = path.join(__dirname, '..', '..', '..');
const DASHBOARD_DIR = path.join(REPO_ROOT, 'deploy/grafana/dashboards');
export const RULES_DIR = path.join(REPO_ROOT, 'deploy/prometheus');

export interface Datasource {
  type: string;
  uid: string;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: Datasource;
  targets?: { expr?: string; query?: string; legendFormat?: string; datasource?: Datasource }[];
  panels?: Panel[];
}

export interface Dashboard {
  file: string;
  uid: string;
  title: string;
  panels: Panel[];
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleFile {
  file: string;
  groups: { name: string; rules: AlertRule[] }[];
}

/** One query and where it comes from (for messages). */
export interface ShippedQuery {
  where: string;
  expr: string;
}

export function dashboards(): Dashboard[] {
  return readdirSync(DASHBOARD_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((file) => ({
      file,
      ...(JSON.parse(readFileSync(path.join(DASHBOARD_DIR, file), 'utf8')) as Omit<
        Dashboard,
        'file'
      >),
    }));
}

/** A dashboard's panels, rows' nested panels included, rows themselves left out. */
export function panelsOf(dashboard: Dashboard): Panel[] {
  const flatten = (panels: Panel[]): Panel[] =>
    panels.flatMap((p) => [p, ...flatten(p.panels ?? [])]);
  return flatten(dashboard.panels).filter((p) => p.type !== 'row');
}

export function ruleFiles(): RuleFile[] {
  return readdirSync(RULES_DIR)
    .filter((f) => f.endsWith('.rules.yml'))
    .map((file) => ({
      file,
      ...(parse(readFileSync(path.join(RULES_DIR, file), 'utf8')) as Omit<RuleFile, 'file'>),
    }));
}

/** Every Prometheus query of every dashboard and every rule file. */
export function shippedQueries(): ShippedQuery[] {
  const queries: ShippedQuery[] = [];
  for (const dashboard of dashboards()) {
    for (const panel of panelsOf(dashboard)) {
      for (const target of panel.targets ?? []) {
        const type = (target.datasource ?? panel.datasource)?.type;
        if (type === 'prometheus' && target.expr)
          queries.push({ where: `${dashboard.file}: "${panel.title}"`, expr: target.expr });
      }
    }
  }
  for (const rules of ruleFiles()) {
    for (const group of rules.groups)
      for (const rule of group.rules)
        queries.push({ where: `${rules.file}: ${rule.alert}`, expr: rule.expr });
  }
  return queries;
}
