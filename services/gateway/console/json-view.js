// @ts-check
import { h, replace } from './dom.js';
import { revealed } from './reveal.js';

/** Strings longer than this are folded to their first {@link FOLDED_LENGTH} characters. */
export const FOLD_OVER = 200;
export const FOLDED_LENGTH = 120;

/**
 * Pretty JSON as DOM, exactly as `JSON.stringify(value, null, 2)` spells it (keys in their order,
 * strings escaped), with long strings folded behind a button that shows the rest. Everything is
 * text: a string holding `<script>` shows as those characters; a character that would change how
 * the text reads (a bidirectional control, a zero-width or look-alike character) shows escaped and
 * marked (reveal.js).
 * @param {unknown} value
 * @returns {HTMLElement}
 */
export function jsonView(value) {
  const pre = h('pre', { class: 'json', tabindex: '0', 'aria-label': 'Input as JSON' });
  render(pre, value, 0);
  return pre;
}

/**
 * @param {HTMLElement} out
 * @param {unknown} value
 * @param {number} depth
 */
function render(out, value, depth) {
  const pad = '  '.repeat(depth + 1);
  const closePad = '  '.repeat(depth);
  if (Array.isArray(value)) {
    if (value.length === 0) return void out.append('[]');
    out.append('[\n');
    value.forEach((item, i) => {
      out.append(pad);
      render(out, item, depth + 1);
      out.append(i < value.length - 1 ? ',\n' : '\n');
    });
    out.append(`${closePad}]`);
    return;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0) return void out.append('{}');
    out.append('{\n');
    entries.forEach(([key, item], i) => {
      out.append(pad, h('span', { class: 'j-key' }, ...revealed(JSON.stringify(key))), ': ');
      render(out, item, depth + 1);
      out.append(i < entries.length - 1 ? ',\n' : '\n');
    });
    out.append(`${closePad}}`);
    return;
  }
  if (typeof value === 'string') return void out.append(stringView(value));
  if (typeof value === 'number')
    return void out.append(h('span', { class: 'j-num' }, String(value)));
  out.append(h('span', { class: 'j-lit' }, String(value)));
}

/**
 * A JSON string, folded when long: the full text is one button press away, and a screen reader
 * hears how much is hidden.
 * @param {string} value
 */
function stringView(value) {
  const full = JSON.stringify(value);
  if (value.length <= FOLD_OVER) return h('span', { class: 'j-str' }, ...revealed(full));
  const head = JSON.stringify(value.slice(0, FOLDED_LENGTH)).slice(0, -1);
  const hidden = value.length - FOLDED_LENGTH;
  const text = h('span', { class: 'j-str' }, ...revealed(`${head}…"`));
  const toggle = h(
    'button',
    { type: 'button', class: 'fold', 'aria-expanded': 'false' },
    `show ${hidden} more characters`,
  );
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') === 'true';
    replace(text, ...revealed(open ? `${head}…"` : full));
    toggle.setAttribute('aria-expanded', String(!open));
    toggle.textContent = open ? `show ${hidden} more characters` : 'fold';
  });
  return h('span', { class: 'j-folded' }, text, ' ', toggle);
}
