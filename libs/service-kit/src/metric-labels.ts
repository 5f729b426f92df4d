import { z } from 'zod';

/**
 * The labels whose values come from users (tenant names, tool names) and so are unbounded: each is
 * kept only when the operator wants it, and then only for a bounded number of distinct values.
 */
const BOUNDED_LABELS = ['tenant', 'tool'] as const;
export type BoundedLabelName = (typeof BOUNDED_LABELS)[number];

/** What a service's metrics may label by tenant and tool (see {@link MetricsEnvShape}). */
export interface MetricsSettings {
  /** The user-valued labels kept; a label left out is absent from every series. */
  readonly labels: readonly BoundedLabelName[];
  /** Distinct values of each kept label per process; later ones are counted as {@link OTHER}. */
  readonly labelCap: number;
}

/** The value a label takes once its cap is reached. */
export const OTHER = 'other';

export const DEFAULT_METRICS_SETTINGS: MetricsSettings = Object.freeze({
  labels: BOUNDED_LABELS,
  labelCap: 50,
});

/**
 * The metrics part of every service's environment, spread into each service's config schema like
 * `NatsEnvShape`, so the variables are parsed once with their defaults defined only here.
 */
export const MetricsEnvShape = {
  /** `tenant,tool` (default), one of them, or `none`: which user-valued labels series carry. */
  METRICS_LABELS: z
    .string()
    .default(DEFAULT_METRICS_SETTINGS.labels.join(','))
    .transform((value, ctx) => {
      const words = value
        .split(',')
        .map((w) => w.trim())
        .filter(Boolean);
      if (words.length === 1 && words[0] === 'none') return [];
      const unknown = words.filter((w) => !(BOUNDED_LABELS as readonly string[]).includes(w));
      if (unknown.length) {
        ctx.addIssue({
          code: 'custom',
          message: `METRICS_LABELS takes ${BOUNDED_LABELS.join(', ')} or none, not ${unknown.join(', ')}`,
        });
        return z.NEVER;
      }
      return [...new Set(words)] as BoundedLabelName[];
    }),
  /** Distinct tenants (and tools) per label per process before the rest count as `other`. */
  METRICS_LABEL_CAP: z.coerce.number().int().min(1).max(10_000).default(50),
};

/** Picks the metrics settings out of a parsed environment. */
export function metricsSettings(e: {
  METRICS_LABELS: readonly BoundedLabelName[];
  METRICS_LABEL_CAP: number;
}): MetricsSettings {
  return Object.freeze({ labels: [...e.METRICS_LABELS], labelCap: e.METRICS_LABEL_CAP });
}

/**
 * One user-valued label with a cap: the first `cap` distinct values are kept as they are, every
 * later one is {@link OTHER}, so a tenant that invents tool names cannot grow the series without
 * bound. Values are kept in first-seen order per process, so replicas may bucket differently once
 * the cap is reached; sums over `other` stay right. A dropped label is `undefined` (left out).
 */
export class BoundedLabel {
  private readonly seen = new Set<string>();

  constructor(
    readonly enabled: boolean,
    private readonly cap: number,
  ) {}

  value(raw: string): string | undefined {
    if (!this.enabled) return undefined;
    if (this.seen.has(raw)) return raw;
    if (this.seen.size >= this.cap) return OTHER;
    this.seen.add(raw);
    return raw;
  }
}

/** Label values by name; an `undefined` value leaves the label out of the series. */
export type LabelSet = Record<string, string | undefined>;

/**
 * prom-client children of one metric, made once per label set. `metric.labels(...)` validates the
 * names and builds a fresh child on every call; on the dispatch path the child is looked up by a
 * key instead. `key` must identify `labels` (callers join the values in a fixed order).
 */
export class Children<C> {
  private readonly cache = new Map<string, C>();

  constructor(private readonly make: (labels: Record<string, string>) => C) {}

  get(key: string, labels: LabelSet): C {
    let child = this.cache.get(key);
    if (!child) {
      const defined: Record<string, string> = {};
      for (const [name, value] of Object.entries(labels))
        if (value !== undefined) defined[name] = value;
      child = this.make(defined);
      this.cache.set(key, child);
    }
    return child;
  }
}
