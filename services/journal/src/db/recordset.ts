import { sql, type RawBuilder } from 'kysely';
import { PRIMARY_KEYS, type Database, type ProjectionTable } from './database';

/** The SQL type of a column written from a record set. */
export type ColumnType =
  'text' | 'bigint' | 'integer' | 'double precision' | 'boolean' | 'timestamptz' | 'jsonb';

/** A table's columns (in insert order) with their SQL types; every column of the table is named. */
export interface TableSpec<T extends ProjectionTable> {
  table: T;
  columns: Readonly<Record<keyof Database[T] & string, ColumnType>>;
}

/** A row as written from a record set: a value for every column (JSON columns as `jsonCell`s). */
export type RecordsetRow<T extends ProjectionTable> = Readonly<
  Record<keyof Database[T] & string, unknown>
>;

/**
 * A JSON column's value inside a record set: wrapped in a one-element array, so that JSON `null` (a
 * tool that returned null) and SQL NULL (the event did not carry the field) stay apart.
 */
export function jsonCell(value: unknown): [unknown] | null {
  return value === undefined ? null : [value];
}

/**
 * `insert into <table> (...) select ... from jsonb_to_recordset($1)`: many rows as ONE text
 * parameter. Postgres parses the JSON; this side only stringifies it. Building the same statement
 * with a bind parameter per cell costs the journal more CPU than everything else it does per event
 * (measured: the query builder and driver walk every cell), and the journal shares a process with
 * the dispatch path in the all-in-one. JSON columns are given as `jsonCell`s.
 */
export function insertFromRecordset<T extends ProjectionTable>(
  spec: TableSpec<T>,
  rows: readonly RecordsetRow<T>[],
): RawBuilder<unknown> {
  const columns = Object.keys(spec.columns) as (keyof Database[T] & string)[];
  const select = columns
    .map((c) => (spec.columns[c] === 'jsonb' ? `r.${c} -> 0` : `r.${c}`))
    .join(', ');
  const types = columns.map((c) => `${c} ${spec.columns[c]}`).join(', ');
  return sql`insert into ${sql.raw(spec.table)} (${sql.raw(columns.join(', '))})
    select ${sql.raw(select)}
    from jsonb_to_recordset(cast(cast(${JSON.stringify(rows)} as text) as jsonb)) as r(${sql.raw(types)})`;
}

/** `on conflict (<primary key>) do update` replacing every other column with the proposed row's. */
export function replaceOnConflict<T extends ProjectionTable>(
  spec: TableSpec<T>,
): RawBuilder<unknown> {
  const key: readonly string[] = PRIMARY_KEYS[spec.table];
  const set = Object.keys(spec.columns)
    .filter((c) => !key.includes(c))
    .map((c) => `${c} = excluded.${c}`)
    .join(', ');
  return sql.raw(`on conflict (${key.join(', ')}) do update set ${set}`);
}
