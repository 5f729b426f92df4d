/**
 * What you see is what runs: characters that change how a text reads without being seen —
 * bidirectional controls (a right-to-left override turns `; rm -rf ~` into `~ fr- mr ;` on screen),
 * zero-width and other invisible characters, and look-alikes of ASCII (a Cyrillic `а` in a Latin
 * word, a full-width `／`, a space that is not a space) — are found here so that every place that
 * shows a tool's input to a person shows them escaped (`\u202E`), marked, and warns about them.
 * The CLI imports this module; the console (plain browser modules, no build step) imports the same
 * code as `/console/visible-text.js`, which the gateway generates from it ({@link visibleTextModule}).
 */

/** Why a character is revealed. */
export type HiddenKind = 'bidi' | 'invisible' | 'control' | 'lookalike';

/** One kind of revealed character in a text, and how often it occurs. */
export interface HiddenFinding {
  /** `U+202E` */
  codePoint: string;
  name: string;
  kind: HiddenKind;
  count: number;
}

const BIDI: Record<number, string> = {
  0x061c: 'arabic letter mark',
  0x200e: 'left-to-right mark',
  0x200f: 'right-to-left mark',
  0x202a: 'left-to-right embedding',
  0x202b: 'right-to-left embedding',
  0x202c: 'pop directional formatting',
  0x202d: 'left-to-right override',
  0x202e: 'right-to-left override',
  0x2066: 'left-to-right isolate',
  0x2067: 'right-to-left isolate',
  0x2068: 'first strong isolate',
  0x2069: 'pop directional isolate',
};

const INVISIBLE: Record<number, string> = {
  0x00ad: 'soft hyphen',
  0x034f: 'combining grapheme joiner',
  0x115f: 'hangul choseong filler',
  0x1160: 'hangul jungseong filler',
  0x17b4: 'khmer vowel inherent aq',
  0x17b5: 'khmer vowel inherent aa',
  0x180e: 'mongolian vowel separator',
  0x200b: 'zero width space',
  0x200c: 'zero width non-joiner',
  0x200d: 'zero width joiner',
  0x2028: 'line separator',
  0x2029: 'paragraph separator',
  0x2060: 'word joiner',
  0x2061: 'function application',
  0x2062: 'invisible times',
  0x2063: 'invisible separator',
  0x2064: 'invisible plus',
  0x3164: 'hangul filler',
  0xfeff: 'zero width no-break space',
  0xffa0: 'halfwidth hangul filler',
  0xfff9: 'interlinear annotation anchor',
  0xfffa: 'interlinear annotation separator',
  0xfffb: 'interlinear annotation terminator',
};

/** Characters that look like a space and are not one (a shell does not split words on them). */
const SPACES: Record<number, string> = {
  0x00a0: 'no-break space',
  0x1680: 'ogham space mark',
  0x202f: 'narrow no-break space',
  0x205f: 'medium mathematical space',
  0x3000: 'ideographic space',
};

/** Scripts whose letters pass for Latin ones: marked when they share a word with ASCII letters. */
const CONFUSABLE_SCRIPTS =
  /[\p{Script=Cyrillic}\p{Script=Greek}\p{Script=Armenian}\p{Script=Cherokee}]/u;

/** Why `cp` (at its place in a word of `word`) is revealed, or null when it shows as itself. */
export function hiddenKind(cp: number, word = ''): { kind: HiddenKind; name: string } | null {
  const bidi = BIDI[cp];
  if (bidi) return { kind: 'bidi', name: bidi };
  const invisible = INVISIBLE[cp];
  if (invisible) return { kind: 'invisible', name: invisible };
  if (cp >= 0xe0000 && cp <= 0xe007f) return { kind: 'invisible', name: 'tag character' };
  if (cp >= 0xfe00 && cp <= 0xfe0f && cp !== 0xfe0f)
    return { kind: 'invisible', name: 'variation selector' };
  if (cp >= 0xe0100 && cp <= 0xe01ef) return { kind: 'invisible', name: 'variation selector' };
  if ((cp < 0x20 && cp !== 0x0a && cp !== 0x09) || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f))
    return { kind: 'control', name: 'control character' };
  const space = SPACES[cp] ?? (cp >= 0x2000 && cp <= 0x200a ? 'typographic space' : undefined);
  if (space) return { kind: 'lookalike', name: space };
  if (cp >= 0xff01 && cp <= 0xff5e) return { kind: 'lookalike', name: 'full-width form' };
  if (cp >= 0x1d400 && cp <= 0x1d7ff) return { kind: 'lookalike', name: 'mathematical letter' };
  const ch = String.fromCodePoint(cp);
  if (CONFUSABLE_SCRIPTS.test(ch) && /[A-Za-z]/.test(word))
    return { kind: 'lookalike', name: `${scriptOf(ch)} letter in a Latin word` };
  return null;
}

function scriptOf(ch: string): string {
  if (/\p{Script=Cyrillic}/u.test(ch)) return 'Cyrillic';
  if (/\p{Script=Greek}/u.test(ch)) return 'Greek';
  if (/\p{Script=Armenian}/u.test(ch)) return 'Armenian';
  return 'Cherokee';
}

/** `U+202E` */
export function codePointLabel(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The escape a revealed character is shown as: `\u202E`, or `\u{E0041}` beyond the BMP. */
export function escapeOf(cp: number): string {
  return cp > 0xffff
    ? `\\u{${cp.toString(16).toUpperCase()}}`
    : `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** One piece of a text: shown as is, or a revealed character. */
export type TextPiece =
  | { text: string }
  | { hidden: { codePoint: number; kind: HiddenKind; name: string; escape: string } };

/** A text split into what shows as is and what is revealed, in logical order. */
export function revealPieces(text: string): TextPiece[] {
  const pieces: TextPiece[] = [];
  let plain = '';
  // Words (runs without white space) decide look-alikes: `pаypal` mixes scripts, `привет` does not.
  for (const word of text.split(/(\s+)/u)) {
    for (const ch of word) {
      const cp = ch.codePointAt(0)!;
      const hidden = hiddenKind(cp, word);
      if (!hidden) {
        plain += ch;
        continue;
      }
      if (plain) pieces.push({ text: plain });
      plain = '';
      pieces.push({ hidden: { codePoint: cp, ...hidden, escape: escapeOf(cp) } });
    }
  }
  if (plain) pieces.push({ text: plain });
  return pieces;
}

/** A text with every revealed character replaced by its escape (`\u202E`). */
export function revealText(text: string): string {
  return revealPieces(text)
    .map((p) => ('text' in p ? p.text : p.hidden.escape))
    .join('');
}

/** Every revealed character in a value's strings and keys, counted by code point. */
export function hiddenFindings(value: unknown): HiddenFinding[] {
  const found = new Map<number, HiddenFinding>();
  const visit = (v: unknown, depth: number): void => {
    if (depth > 200) return;
    if (typeof v === 'string') {
      for (const p of revealPieces(v)) {
        if (!('hidden' in p)) continue;
        const { codePoint, kind, name } = p.hidden;
        const seen = found.get(codePoint);
        if (seen) seen.count += 1;
        else found.set(codePoint, { codePoint: codePointLabel(codePoint), name, kind, count: 1 });
      }
    } else if (Array.isArray(v)) {
      for (const item of v) visit(item, depth + 1);
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, item] of Object.entries(v)) {
        visit(k, depth + 1);
        visit(item, depth + 1);
      }
    }
  };
  visit(value, 0);
  return [...found.values()];
}

/** The warning a person reads before deciding: what is hidden in the input, or null. */
export function hiddenWarning(findings: readonly HiddenFinding[]): string | null {
  if (findings.length === 0) return null;
  const list = findings
    .map((f) => `${f.codePoint} ${f.name}${f.count > 1 ? ` ×${f.count}` : ''}`)
    .join(', ');
  return `the input has characters that change how it reads, shown escaped: ${list}`;
}

/**
 * This module's rules as a browser ES module (served by the gateway as `/console/visible-text.js`):
 * its tables and the source of its functions as they run here, so the console and the CLI can never
 * disagree about what is revealed. Everything listed is self-contained (no imports, no exported
 * constants, which CommonJS output would reach through `exports`).
 */
export function visibleTextModule(): string {
  const tables = { BIDI, INVISIBLE, SPACES };
  const functions = [
    scriptOf,
    hiddenKind,
    codePointLabel,
    escapeOf,
    revealPieces,
    revealText,
    hiddenFindings,
  ];
  return [
    '// Generated by the gateway from contracts/src/visible-text.ts: edit that file, not this one.',
    ...Object.entries(tables).map(([name, table]) => `const ${name} = ${JSON.stringify(table)};`),
    `const CONFUSABLE_SCRIPTS = ${CONFUSABLE_SCRIPTS.toString()};`,
    ...functions.map((fn) => `export ${fn.toString()}`),
    '',
  ].join('\n');
}
