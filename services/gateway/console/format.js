// @ts-check
import { h } from './dom.js';

/**
 * A duration in the largest two units: `45s`, `3m 20s`, `2h 5m`, `3d 4h`.
 * @param {number} ms
 */
export function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m}m ${s % 60}s` : `${m}m`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return m % 60 ? `${hours}h ${m % 60}m` : `${hours}h`;
  const d = Math.floor(hours / 24);
  return hours % 24 ? `${d}d ${hours % 24}h` : `${d}d`;
}

/**
 * A `<time>` of an ISO instant in local time, its full form in the title.
 * @param {string | null | undefined} iso
 */
export function time(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  const text = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(
    d.getHours(),
  )}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return h('time', { datetime: iso, title: d.toString() }, text);
}

/**
 * How long ago an instant was, kept current by {@link refreshAges}.
 * @param {string | null | undefined} iso
 */
export function age(iso) {
  if (!iso) return '—';
  return h('span', { 'data-since': iso }, duration(Date.now() - Date.parse(iso)));
}

/**
 * How long until an instant, kept current by {@link refreshAges}.
 * @param {string | null | undefined} iso
 */
export function until(iso) {
  if (!iso) return '—';
  return h('span', { 'data-until': iso }, untilText(iso));
}

/** @param {string} iso */
function untilText(iso) {
  const left = Date.parse(iso) - Date.now();
  return left > 0 ? `in ${duration(left)}` : 'now';
}

/**
 * Brings every age and countdown under `root` up to date, touching only their text (focus and
 * selection stay where they are).
 * @param {ParentNode} root
 */
export function refreshAges(root) {
  for (const el of root.querySelectorAll('[data-since]')) {
    setText(el, duration(Date.now() - Date.parse(el.getAttribute('data-since') ?? '')));
  }
  for (const el of root.querySelectorAll('[data-until]')) {
    setText(el, untilText(el.getAttribute('data-until') ?? ''));
  }
}

/**
 * Sets `el`'s text only when it changes: an age reads the same for a minute, and a write the
 * browser must lay out again every second is work for nothing.
 * @param {Element} el
 * @param {string} text
 */
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/**
 * The rule that asked, in a few words: its id, or its place in the policy, or what decided. `short`
 * keeps the name only (a table cell); the long form says where the rule lives.
 * @param {unknown} rule
 * @param {string | null | undefined} decidedBy
 * @param {{ short?: boolean }} [options]
 */
export function ruleSummary(rule, decidedBy, { short = false } = {}) {
  if (rule && typeof rule === 'object') {
    const r = /** @type {Record<string, unknown>} */ (rule);
    const str = (/** @type {unknown} */ v) => (typeof v === 'string' ? v : undefined);
    if (r.kind === 'protected-path')
      return `protected path ${str(r.path) ?? '(not literal)'}${
        !short && r.pattern ? ` (${str(r.pattern)})` : ''
      }`;
    if (r.kind === 'hook') return `hook ${str(r.name) ?? `#${String(r.index ?? '?')}`}`;
    if (r.kind === 'canUseTool') return 'canUseTool';
    const where = [str(r.source), str(r.layer)].filter(Boolean).join(' ');
    const kind = r.kind === 'expression' ? 'expression' : 'rule';
    const index = typeof r.index === 'number' ? `#${r.index}` : '';
    const id = str(r.id);
    if (short) return id ? `"${id}"` : [where, kind, index].filter(Boolean).join(' ') || '—';
    const what = [where, kind, id ? `"${id}"` : index].filter(Boolean).join(' ');
    return what || decidedBy || '—';
  }
  return decidedBy ?? '—';
}

/**
 * An agent reference as text.
 * @param {{ agentType?: string, label?: string } | null | undefined} agent
 */
export function agentText(agent) {
  if (!agent) return '—';
  return agent.label ? `${agent.agentType} (${agent.label})` : String(agent.agentType);
}

/**
 * How a call ended, as text.
 * @param {{ outcome: string | null, errorCode: string | null } | null | undefined} settled
 */
export function outcomeText(settled) {
  if (!settled?.outcome) return 'not settled yet';
  // A denial's error code is `denied` itself: said once.
  return settled.errorCode && settled.errorCode !== settled.outcome
    ? `${settled.outcome} (${settled.errorCode})`
    : settled.outcome;
}
