// @ts-check
import { h } from './dom.js';

/**
 * What you see is what runs: characters that change how a text reads without being seen —
 * bidirectional controls (a right-to-left override shows `; rm -rf ~` as `~ fr- mr ;`), zero-width
 * and other invisible characters, and look-alikes of ASCII (a Cyrillic `а` in a Latin word, a
 * full-width `／`, a space that is not a space) — are shown escaped (`\u202E`) in a marked element
 * naming them, never as themselves. The same rule as `contracts/src/visible-text.ts` (the CLI's).
 */

/** @type {Record<number, string>} */
const BIDI = {
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

/** @type {Record<number, string>} */
const INVISIBLE = {
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

/** @type {Record<number, string>} */
const SPACES = {
  0x00a0: 'no-break space',
  0x1680: 'ogham space mark',
  0x202f: 'narrow no-break space',
  0x205f: 'medium mathematical space',
  0x3000: 'ideographic space',
};

const CONFUSABLE = /[\p{Script=Cyrillic}\p{Script=Greek}\p{Script=Armenian}\p{Script=Cherokee}]/u;

/**
 * Why a character is revealed, or null when it shows as itself.
 * @param {number} cp
 * @param {string} word the run without white space it stands in
 * @returns {{ kind: string, name: string } | null}
 */
export function hiddenKind(cp, word) {
  if (BIDI[cp]) return { kind: 'bidi', name: BIDI[cp] };
  if (INVISIBLE[cp]) return { kind: 'invisible', name: INVISIBLE[cp] };
  if (cp >= 0xe0000 && cp <= 0xe007f) return { kind: 'invisible', name: 'tag character' };
  if (cp >= 0xfe00 && cp <= 0xfe0e) return { kind: 'invisible', name: 'variation selector' };
  if (cp >= 0xe0100 && cp <= 0xe01ef) return { kind: 'invisible', name: 'variation selector' };
  if ((cp < 0x20 && cp !== 0x0a && cp !== 0x09) || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f))
    return { kind: 'control', name: 'control character' };
  const space = SPACES[cp] ?? (cp >= 0x2000 && cp <= 0x200a ? 'typographic space' : undefined);
  if (space) return { kind: 'lookalike', name: space };
  if (cp >= 0xff01 && cp <= 0xff5e) return { kind: 'lookalike', name: 'full-width form' };
  if (cp >= 0x1d400 && cp <= 0x1d7ff) return { kind: 'lookalike', name: 'mathematical letter' };
  const ch = String.fromCodePoint(cp);
  if (CONFUSABLE.test(ch) && /[A-Za-z]/.test(word))
    return { kind: 'lookalike', name: 'letter of another script in a Latin word' };
  return null;
}

/** @param {number} cp */
export function codePointLabel(cp) {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** @param {number} cp */
function escapeOf(cp) {
  return cp > 0xffff
    ? `\\u{${cp.toString(16).toUpperCase()}}`
    : `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * A text as DOM children: plain runs as text, each revealed character as a `<mark class="hidden-char">`
 * holding its escape, titled with its code point and name. `found` (when given) counts them.
 * @param {string} text
 * @param {Map<string, { name: string, count: number }>} [found]
 * @returns {(string | HTMLElement)[]}
 */
export function revealed(text, found) {
  /** @type {(string | HTMLElement)[]} */
  const out = [];
  let plain = '';
  for (const word of text.split(/(\s+)/u)) {
    for (const ch of word) {
      const cp = /** @type {number} */ (ch.codePointAt(0));
      const hidden = hiddenKind(cp, word);
      if (!hidden) {
        plain += ch;
        continue;
      }
      if (plain) out.push(plain);
      plain = '';
      const label = codePointLabel(cp);
      const seen = found?.get(label);
      if (seen) seen.count += 1;
      else found?.set(label, { name: hidden.name, count: 1 });
      out.push(
        h(
          'mark',
          {
            class: `hidden-char ${hidden.kind}`,
            title: `${label} ${hidden.name}`,
            'data-code-point': label,
          },
          escapeOf(cp),
        ),
      );
    }
  }
  if (plain) out.push(plain);
  return out;
}

/**
 * Every revealed character in a value's strings and keys.
 * @param {unknown} value
 * @returns {Map<string, { name: string, count: number }>}
 */
export function findings(value) {
  /** @type {Map<string, { name: string, count: number }>} */
  const found = new Map();
  /** @param {unknown} v @param {number} depth */
  const visit = (v, depth) => {
    if (depth > 200) return;
    if (typeof v === 'string') revealed(v, found);
    else if (Array.isArray(v)) for (const item of v) visit(item, depth + 1);
    else if (v && typeof v === 'object')
      for (const [k, item] of Object.entries(v)) {
        visit(k, depth + 1);
        visit(item, depth + 1);
      }
  };
  visit(value, 0);
  return found;
}

/**
 * The review's warning about what is hidden in an input, or null when nothing is.
 * @param {Map<string, { name: string, count: number }>} found
 */
export function hiddenWarning(found) {
  if (found.size === 0) return null;
  return h(
    'div',
    { class: 'warning hidden-warning', role: 'alert', id: 'hidden-warning' },
    h('strong', {}, 'Hidden characters. '),
    'This input has characters that change how it reads; they are shown escaped and marked: ',
    [...found.entries()].map(([label, { name, count }], i) => [
      i ? ', ' : '',
      h('code', {}, label),
      ` ${name}${count > 1 ? ` ×${count}` : ''}`,
    ]),
    '. Read it as the tool will receive it before deciding.',
  );
}
