// @ts-check
import { h } from './dom.js';
import { codePointLabel, hiddenFindings, revealPieces } from './visible-text.js';

/**
 * What you see is what runs: characters that change how a text reads without being seen —
 * bidirectional controls (a right-to-left override shows `; rm -rf ~` as `~ fr- mr ;`), zero-width
 * and other invisible characters, and look-alikes of ASCII (a Cyrillic `а` in a Latin word, a
 * full-width `／`, a space that is not a space) — are shown escaped (`\u202E`) in a marked element
 * naming them, never as themselves. Which characters those are is decided by
 * `contracts/src/visible-text.ts` (the CLI's rules), which the gateway serves as `visible-text.js`.
 */

/**
 * A text as DOM children: plain runs as text, each revealed character as a `<mark class="hidden-char">`
 * holding its escape, titled with its code point and name. `found` (when given) counts them.
 * @param {string} text
 * @param {Map<string, { name: string, count: number }>} [found]
 * @returns {(string | HTMLElement)[]}
 */
export function revealed(text, found) {
  return revealPieces(text).map((piece) => {
    if ('text' in piece) return piece.text;
    const { codePoint, kind, name, escape } = piece.hidden;
    const label = codePointLabel(codePoint);
    const seen = found?.get(label);
    if (seen) seen.count += 1;
    else found?.set(label, { name, count: 1 });
    return h(
      'mark',
      { class: `hidden-char ${kind}`, title: `${label} ${name}`, 'data-code-point': label },
      escape,
    );
  });
}

/**
 * Every revealed character in a value's strings and keys.
 * @param {unknown} value
 * @returns {Map<string, { name: string, count: number }>}
 */
export function findings(value) {
  return new Map(hiddenFindings(value).map((f) => [f.codePoint, { name: f.name, count: f.count }]));
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
