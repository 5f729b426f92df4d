import type { Json } from './tables/json-column';

/** An ISO 8601 instant from a timestamptz column. */
export function toIso(value: Date): string;
export function toIso(value: Date | null): string | null;
export function toIso(value: Date | null): string | null {
  return value === null ? null : value.toISOString();
}

/** A JSON column's value as a domain value: SQL NULL means the event did not carry it. */
export function fromJsonb(value: Json | null): unknown {
  return value === null ? undefined : value;
}

/** The `code` of a wire error stored in a JSON column (`dispatches.error`), if it has one. */
export function errorCodeOf(value: Json | null): string | null {
  const code = (value as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : null;
}
