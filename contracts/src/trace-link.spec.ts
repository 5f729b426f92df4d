import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { traceLink, traceLinkModule, TraceUrlTemplateSchema } from './trace-link';

const TEMPLATE = 'https://grafana.example/explore?left={"queries":[{"query":"{traceId}"}]}';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

describe('trace UI links', () => {
  it('puts a trace id into the configured template, every place it is marked', () => {
    expect(traceLink(TEMPLATE, TRACE)).toBe(
      `https://grafana.example/explore?left={"queries":[{"query":"${TRACE}"}]}`,
    );
    expect(traceLink('https://t.example/{traceId}?again={traceId}', TRACE)).toBe(
      `https://t.example/${TRACE}?again=${TRACE}`,
    );
  });

  it('makes no link without a template or from anything but 32 lowercase hex digits', () => {
    expect(traceLink(null, TRACE)).toBeNull();
    expect(traceLink(undefined, TRACE)).toBeNull();
    expect(traceLink('https://t.example/no-placeholder', TRACE)).toBeNull();
    for (const bad of [
      null,
      undefined,
      '',
      '0'.repeat(32),
      TRACE.toUpperCase(),
      TRACE.slice(1),
      `${TRACE}0`,
      `${TRACE.slice(0, 31)}"`,
      `${TRACE.slice(0, 20)}/../javascript:`,
      `${TRACE}\n`,
    ])
      expect(traceLink(TEMPLATE, bad)).toBeNull();
  });

  it('accepts as a template only an absolute http(s) URL without credentials that marks the id', () => {
    expect(TraceUrlTemplateSchema.safeParse(TEMPLATE).success).toBe(true);
    expect(TraceUrlTemplateSchema.safeParse('http://jaeger:16686/trace/{traceId}').success).toBe(
      true,
    );
    for (const bad of [
      'https://grafana.example/explore',
      'javascript:alert(1)//{traceId}',
      'data:text/html,{traceId}',
      '/relative/{traceId}',
      'https://user:secret@grafana.example/{traceId}',
      'not a url {traceId}',
    ])
      expect({ bad, ok: TraceUrlTemplateSchema.safeParse(bad).success }).toEqual({
        bad,
        ok: false,
      });
  });

  it('generates a standalone ES module, the console’s, that links exactly as this one does', () => {
    const cases: [string | null, string | null][] = [
      [TEMPLATE, TRACE],
      [TEMPLATE, '0'.repeat(32)],
      [TEMPLATE, TRACE.toUpperCase()],
      [null, TRACE],
      ['https://t.example/{traceId}/{traceId}', TRACE],
    ];
    const dir = mkdtempSync(path.join(tmpdir(), 'trace-link-'));
    try {
      writeFileSync(path.join(dir, 'trace-link.mjs'), traceLinkModule());
      const program = [
        "import { traceLink } from './trace-link.mjs';",
        `const cases = ${JSON.stringify(cases)};`,
        'console.log(JSON.stringify(cases.map(([t, id]) => traceLink(t, id))));',
      ].join('\n');
      writeFileSync(path.join(dir, 'run.mjs'), program);
      const out = execFileSync(process.execPath, [path.join(dir, 'run.mjs')], { encoding: 'utf8' });
      expect(JSON.parse(out)).toEqual(cases.map(([t, id]) => traceLink(t, id)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
