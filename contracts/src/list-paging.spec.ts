import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { INPUT_PREVIEW_CHARS, inputPreview, inputPreviewModule } from './list-paging';

describe('inputPreviewModule', () => {
  it('generates a standalone ES module, the console’s, that previews exactly as this one does', () => {
    const corpus: unknown[] = [
      { command: 'echo ok # \u202E; rm -rf ~' },
      { path: '/tmp/x', command: 'ls' },
      { file_path: { nested: true } },
      { note: 'x'.repeat(INPUT_PREVIEW_CHARS * 2) },
      { command: `${'😀'.repeat(100)}` },
      ['command', 'not an object'],
      'plain',
      null,
      42,
    ];
    const dir = mkdtempSync(path.join(tmpdir(), 'input-preview-'));
    try {
      writeFileSync(path.join(dir, 'input-preview.mjs'), inputPreviewModule());
      const program = [
        "import { inputPreview } from './input-preview.mjs';",
        `const corpus = ${JSON.stringify(corpus)};`,
        'console.log(JSON.stringify(corpus.map((input) => inputPreview(input))));',
      ].join('\n');
      writeFileSync(path.join(dir, 'run.mjs'), program);
      const out = execFileSync(process.execPath, [path.join(dir, 'run.mjs')], { encoding: 'utf8' });
      const expected = corpus.map((input) => inputPreview(input));
      expect(JSON.parse(out)).toEqual(expected);
      // The corpus reaches every branch: a summary, none, a cut JSON text, a cut astral summary.
      expect(expected.map((p) => p.summary !== null)).toContain(false);
      expect(expected.some((p) => p.truncated)).toBe(true);
      expect(expected[4]!.summary!.length).toBe(160);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
