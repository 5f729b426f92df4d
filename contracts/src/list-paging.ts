import { z } from 'zod';

/**
 * How list replies stay bounded whatever tenants submit. A list reply (approvals, a run's
 * dispatches, the history) travels over NATS from the journal to the gateway, whose broker refuses
 * a message over its `max_payload` (1 MiB by default): a reply that carried every item's full input
 * could be pushed over it by one large call, and the list would fail for everyone of the tenant. So
 * a list carries a bounded preview of each input (the full input is read per item), every item is
 * bounded, and a page stops at {@link LIST_REPLY_BUDGET_BYTES} — the rest follows with `cursor`.
 */

/**
 * The most bytes a page's items may take as JSON. A quarter of the smallest `max_payload` Toolgate
 * supports (1 MiB), so the envelope, headers and a signature always fit beside it.
 */
export const LIST_REPLY_BUDGET_BYTES = 256 * 1024;

/** The most bytes one listed item may take as JSON; larger fields are replaced by a marker. */
export const LIST_ITEM_MAX_BYTES = 16 * 1024;

/**
 * The JSON bytes one registered tool (its description, schema, policy and the rest, as `tools.list`
 * shows it) may take, and a tenant's whole toolset, builtins included: registration refuses more
 * (`too-large`), so every `tools.list` answer — bus, HTTP, MCP — fits in the broker's default
 * `max_payload` (1 MiB) without pages (a race of concurrent registrations can pass the toolset's
 * bound by one tool each).
 */
export const TOOL_VIEW_MAX_BYTES = 64 * 1024;
export const TOOLSET_MAX_BYTES = 512 * 1024;

/**
 * Page sizes (items per page) of the paged lists: the size when a request names none, and the
 * largest it may ask for. The one definition: the request schemas, the journal's queries, the SDK
 * and the CLI read these. A page also ends early at {@link LIST_REPLY_BUDGET_BYTES}.
 */
export const PageLimit = {
  /** `approvals.list` (`GET /v1/approvals`). */
  approvals: { default: 100, max: 1000 },
  /** A run's dispatches (`run.get`, `GET /v1/runs/{runId}`). */
  runDispatches: { default: 500, max: 1000 },
} as const;

/*
 * The preview's sizes and fields, as module-private constants that {@link inputPreview} reads (the
 * console runs its source, {@link inputPreviewModule}, where an exported constant would not exist)
 * and exported under their public names below.
 */
const PREVIEW_CHARS = 512;
const SUMMARY_CHARS = 160;
const SUMMARY_FIELDS = ['command', 'path', 'file_path', 'url', 'pattern', 'query'] as const;

/** Characters of an input's JSON text a list carries. */
export const INPUT_PREVIEW_CHARS = PREVIEW_CHARS;

/** Characters of an input's headline field (its command, path, url...) a list carries. */
export const INPUT_SUMMARY_CHARS = SUMMARY_CHARS;

/**
 * The fields whose value says what a call does, in the order they are looked for: a shell call's
 * command, a file tool's path, a fetch's url, a search's pattern or query.
 */
export const INPUT_SUMMARY_FIELDS = SUMMARY_FIELDS;

/** What a list shows of an input: the start of its JSON text and the field that says what it does. */
export interface InputPreview {
  /** The start of the input's JSON text (at most {@link INPUT_PREVIEW_CHARS} characters). */
  json: string;
  /** Whether `json` is cut: read the item for all of it. */
  truncated: boolean;
  /** The size of the whole input's JSON text in bytes. */
  bytes: number;
  /** The first of {@link INPUT_SUMMARY_FIELDS} the input has, as text, cut like `json`; else null. */
  summary: string | null;
}

/** A cursor: opaque to callers, `[A-Za-z0-9_-]` (base64url), at most 512 characters. */
export const ListCursorSchema = z.string().regex(/^[A-Za-z0-9_-]{1,512}$/, 'not a list cursor');

/** A page of a list: its items and the cursor of the next page (null: this was the last). */
export interface Page {
  nextCursor: string | null;
}

/**
 * `text` cut to at most `max` UTF-16 code units, never between the two halves of a surrogate
 * pair (a lone half would not survive encoding).
 */
export function cutText(text: string, max: number): { text: string; cut: boolean } {
  if (text.length <= max) return { text, cut: false };
  let end = max;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return { text: text.slice(0, end), cut: true };
}

/**
 * The preview of an input, computed from the value itself (the journal computes it in SQL; the
 * console runs this very function, {@link inputPreviewModule}, for a call its live feed brought).
 */
export function inputPreview(input: unknown): InputPreview {
  const json = JSON.stringify(input ?? null);
  const head = cutText(json, PREVIEW_CHARS);
  let summary: string | null = null;
  if (typeof input === 'object' && input !== null && !Array.isArray(input)) {
    for (const field of SUMMARY_FIELDS) {
      const value = (input as Record<string, unknown>)[field];
      if (value === undefined) continue;
      summary = cutText(
        typeof value === 'string' ? value : JSON.stringify(value),
        SUMMARY_CHARS,
      ).text;
      break;
    }
  }
  return {
    json: head.text,
    truncated: head.cut,
    bytes: new TextEncoder().encode(json).length,
    summary,
  };
}

/**
 * {@link inputPreview} as a browser ES module (served by the gateway as `/console/input-preview.js`):
 * the console previews a call its live feed brought with the code the journal's listing is checked
 * against, so the two cannot drift. Self-contained like `visibleTextModule`.
 */
export function inputPreviewModule(): string {
  return [
    '// Generated by the gateway from contracts/src/list-paging.ts: edit that file, not this one.',
    `const PREVIEW_CHARS = ${JSON.stringify(PREVIEW_CHARS)};`,
    `const SUMMARY_CHARS = ${JSON.stringify(SUMMARY_CHARS)};`,
    `const SUMMARY_FIELDS = ${JSON.stringify(SUMMARY_FIELDS)};`,
    `export ${cutText.toString()}`,
    `export ${inputPreview.toString()}`,
    '',
  ].join('\n');
}

/**
 * Takes items for one page while their JSON fits in `budget` bytes (always at least one: every
 * item is bounded by {@link LIST_ITEM_MAX_BYTES}). Answers how many fit.
 */
export function fitPage(items: readonly unknown[], budget = LIST_REPLY_BUDGET_BYTES): number {
  let used = 0;
  for (let i = 0; i < items.length; i++) {
    used += new TextEncoder().encode(JSON.stringify(items[i])).length + 1;
    if (used > budget && i > 0) return i;
  }
  return items.length;
}
