// @ts-check
/**
 * The console's only way to build markup: elements and text nodes, never HTML strings. Tool input,
 * agent labels, reasons and rule texts are attacker-controlled; they only ever become text nodes or
 * plain attribute values (the page's Trusted Types policy makes any HTML sink throw anyway).
 */

/** @typedef {string | number | Node | null | undefined | false | unknown[]} Child A child, or a list of them. */

/**
 * An element with attributes and children. `on<event>` attributes take listeners; `class` sets the
 * class name; `true` sets a boolean attribute; null, undefined and false are left out. Children
 * that are strings or numbers become text nodes.
 * @param {string} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), /** @type {EventListener} */ (value));
    } else if (name === 'class') {
      el.className = String(value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * Appends children (text for strings and numbers).
 * @param {Node} parent
 * @param {Child[]} children
 */
export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, /** @type {Child[]} */ (child));
    else if (typeof child === 'string' || typeof child === 'number')
      parent.appendChild(document.createTextNode(String(child)));
    else parent.appendChild(child);
  }
}

/**
 * Replaces an element's children.
 * @param {Element} parent
 * @param {...Child} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/**
 * The element with this id (throws when the page lacks it: a bug, not a state).
 * @template {HTMLElement} T
 * @param {string} id
 * @returns {T}
 */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`no #${id} in the page`);
  return /** @type {T} */ (el);
}
