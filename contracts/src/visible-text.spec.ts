import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  hiddenFindings,
  hiddenWarning,
  revealPieces,
  revealText,
  visibleTextModule,
} from './visible-text';

describe('revealing what changes how a text reads', () => {
  it('escapes a right-to-left override, so a command reads in the order it runs', () => {
    expect(revealText('echo ok # \u202E; rm -rf ~')).toBe('echo ok # \\u202E; rm -rf ~');
    expect(revealText('invoice\u202Egpj.exe')).toBe('invoice\\u202Egpj.exe');
    expect(revealPieces('a\u202Eb')).toEqual([
      { text: 'a' },
      {
        hidden: {
          codePoint: 0x202e,
          kind: 'bidi',
          name: 'right-to-left override',
          escape: '\\u202E',
        },
      },
      { text: 'b' },
    ]);
  });

  it('escapes every bidirectional control, zero-width and invisible character', () => {
    const bidi = [
      0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f,
      0x061c,
    ];
    const invisible = [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0xe0041];
    for (const cp of [...bidi, ...invisible]) {
      const text = `rm${String.fromCodePoint(cp)}x`;
      expect(revealText(text)).not.toBe(text);
      expect(revealText(text)).toMatch(/^rm\\u(\{E0041\}|[0-9A-F]{4})x$/);
    }
  });

  it('marks look-alikes in a Latin word, a space that is not one, full-width forms; leaves plain text and other scripts alone', () => {
    expect(revealText('p\u0430ypal.com')).toBe('p\\u0430ypal.com');
    expect(revealText('rm\u00a0-rf')).toBe('rm\\u00A0-rf');
    expect(revealText('\uff0fetc\uff0fpasswd')).toBe('\\uFF0Fetc\\uFF0Fpasswd');
    for (const plain of [
      'привет мир',
      'καλημέρα',
      'ls -la ~/src',
      'naïve café',
      '日本語',
      'emoji ❤️',
    ])
      expect(revealText(plain)).toBe(plain);
  });

  it('counts findings through keys and nested values, and words a warning', () => {
    const findings = hiddenFindings({ ['k\u200b']: ['a\u202Eb', { c: 'x\u202Ey' }], n: 1 });
    expect(findings).toEqual([
      { codePoint: 'U+200B', name: 'zero width space', kind: 'invisible', count: 1 },
      { codePoint: 'U+202E', name: 'right-to-left override', kind: 'bidi', count: 2 },
    ]);
    expect(hiddenWarning(findings)).toBe(
      'the input has characters that change how it reads, shown escaped: U+200B zero width space, U+202E right-to-left override ×2',
    );
    expect(hiddenWarning(hiddenFindings({ command: 'ls' }))).toBeNull();
  });

  it('generates a standalone ES module, the console’s, that reveals exactly what this one does', () => {
    const corpus = [
      'echo ok # \u202E; rm -rf ~',
      'p\u0430ypal.com \u03b1lpha \u0561b \u13a0x',
      'rm\u00a0-rf\u2003x \uff0fetc \u{1D400}',
      'a\u200bb\u{E0041}\ufe0e\ufe0f\u{E0100}\u0007\u0085\t\n',
      'привет мир naïve café 日本語 emoji ❤️',
    ];
    const dir = mkdtempSync(path.join(tmpdir(), 'visible-text-'));
    try {
      writeFileSync(path.join(dir, 'visible-text.mjs'), visibleTextModule());
      const program = [
        "import * as v from './visible-text.mjs';",
        `const corpus = ${JSON.stringify(corpus)};`,
        'console.log(JSON.stringify({',
        '  pieces: corpus.map((t) => v.revealPieces(t)),',
        '  text: corpus.map((t) => v.revealText(t)),',
        '  findings: v.hiddenFindings({ corpus }),',
        '}));',
      ].join('\n');
      writeFileSync(path.join(dir, 'run.mjs'), program);
      const out = execFileSync(process.execPath, [path.join(dir, 'run.mjs')], { encoding: 'utf8' });
      expect(JSON.parse(out)).toEqual({
        pieces: corpus.map((t) => revealPieces(t)),
        text: corpus.map((t) => revealText(t)),
        findings: hiddenFindings({ corpus }),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
