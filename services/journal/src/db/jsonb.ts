import { sql, type RawBuilder } from 'kysely';
import type { Json } from './tables/json-column';

/**
 * A value for a `jsonb` column. The JSON goes over the wire as a text parameter cast to jsonb, so
 * both drivers agree: node-postgres would send a JS array as a Postgres array literal, and PGlite
 * would stringify a string a second time. `undefined` (an absent value) is SQL NULL.
 */
export function toJsonb(value: unknown): RawBuilder<Json> | null {
  if (value === undefined) return null;
  return sql<Json>`cast(cast(${JSON.stringify(value)} as text) as jsonb)`;
}

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
