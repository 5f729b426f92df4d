import { z } from 'zod';
import { BoundedLabel, Children, MetricsEnvShape, metricsSettings, OTHER } from './metric-labels';

const parse = (env: Record<string, string>) =>
  metricsSettings(z.object(MetricsEnvShape).parse(env));

describe('metrics settings (METRICS_LABELS, METRICS_LABEL_CAP)', () => {
  it('keeps tenant and tool, 50 values each, by default', () => {
    expect(parse({})).toEqual({ labels: ['tenant', 'tool'], labelCap: 50 });
  });

  it('keeps only the labels named, or none', () => {
    expect(parse({ METRICS_LABELS: 'tool' }).labels).toEqual(['tool']);
    expect(parse({ METRICS_LABELS: ' tenant , tenant' }).labels).toEqual(['tenant']);
    expect(parse({ METRICS_LABELS: 'none' }).labels).toEqual([]);
    expect(parse({ METRICS_LABEL_CAP: '3' }).labelCap).toBe(3);
  });

  it('refuses a label it does not know and a cap below one', () => {
    expect(() => parse({ METRICS_LABELS: 'tenant,agent' })).toThrow(/not agent/);
    expect(() => parse({ METRICS_LABEL_CAP: '0' })).toThrow();
  });
});

describe('BoundedLabel', () => {
  it('keeps the first values up to its cap and counts the rest as other, stably', () => {
    const label = new BoundedLabel(true, 2);
    expect(['a', 'b', 'c', 'a', 'd', 'b'].map((v) => label.value(v))).toEqual([
      'a',
      'b',
      OTHER,
      'a',
      OTHER,
      'b',
    ]);
  });

  it('leaves the label out when it is dropped', () => {
    expect(new BoundedLabel(false, 10).value('acme')).toBeUndefined();
  });
});

describe('Children', () => {
  it('makes one child per key, with the undefined labels left out', () => {
    const made: Record<string, string>[] = [];
    const children = new Children((labels) => {
      made.push(labels);
      return { labels };
    });
    const first = children.get('ok\0-', { outcome: 'ok', tenant: undefined });
    expect(children.get('ok\0-', { outcome: 'ok', tenant: undefined })).toBe(first);
    children.get('ok\0acme', { outcome: 'ok', tenant: 'acme' });
    expect(made).toEqual([{ outcome: 'ok' }, { outcome: 'ok', tenant: 'acme' }]);
  });
});
