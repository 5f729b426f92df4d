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
 * `insert into <table> (...) select ... from jsonb_array_elements($1)`: many rows as ONE text
 * parameter, each row a JSON array of its cells in column order. Postgres parses the JSON; this
 * side only stringifies it. Building the same statement with a bind parameter per cell costs the
 * journal more CPU than everything else it does per event (measured: the query builder and driver
 * walk every cell), and the journal shares a process with the dispatch path in the all-in-one.
 * Arrays, not objects keyed by column: parsing the parameter was half of what PostgreSQL spent on a
 * fold (`jsonb` sorts every object's keys, and a dispatch row has 45 of them), and a cell is then
 * read by its position instead of a search by name. JSON columns are given as `jsonCell`s.
 */
export function insertFromRecordset<T extends ProjectionTable>(
  spec: TableSpec<T>,
  rows: readonly RecordsetRow<T>[],
): RawBuilder<unknown> {
  const columns = Object.keys(spec.columns) as (keyof Database[T] & string)[];
  const select = columns.map((c, i) => cell(spec.columns[c], i)).join(', ');
  const cells = rows.map((row) => columns.map((c) => row[c]));
  return sql`insert into ${sql.raw(spec.table)} (${sql.raw(columns.join(', '))})
    select ${sql.raw(select)}
    from jsonb_array_elements(cast(cast(${storableJson(cells)} as text) as jsonb)) as r(v)`;
}

/**
 * The SQL reading cell `i` of a record-set row `r.v` as a column of this type. A JSON cell is a
 * `jsonCell`: `null` for SQL NULL, which `-> 0` alone would read as JSON null (a scalar is an
 * array of one to it).
 */
function cell(type: ColumnType, i: number): string {
  if (type === 'jsonb') return `nullif(r.v -> ${i}, 'null') -> 0`;
  if (type === 'text') return `r.v ->> ${i}`;
  return `cast(r.v ->> ${i} as ${type})`;
}

/** A NUL or an unpaired surrogate: what PostgreSQL's `text` and `jsonb` refuse. */
// eslint-disable-next-line no-control-regex -- matching NUL is the point
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/** How JSON.stringify writes them: `\u0000` and a lone surrogate's `\udxxx` escape. */
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f]/i;

/**
 * JSON text PostgreSQL takes: it refuses U+0000 in `text` and `jsonb` and unpaired UTF-16
 * surrogates in `jsonb`, and both are valid in a journal event (a tool's result read from a binary
 * file, a caller's input). Such strings — values and keys — are stored with U+FFFD in their place,
 * so one odd string never stops the projection; the stream keeps the event as it was. The common
 * case costs one scan of the text for the escapes JSON.stringify writes for them: a search for
 * `\u` (what every such escape starts with), a quarter of the cost of running the pattern over the
 * whole text, which then only looks at texts that have one.
 */
export function storableJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (!text.includes('\\u') || !UNSTORABLE_ESCAPE.test(text)) return text;
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'string') return storable(v);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.some((k) => storable(k) !== k)) {
        return Object.fromEntries(
          keys.map((k) => [storable(k), (v as Record<string, unknown>)[k]]),
        );
      }
    }
    return v;
  });
}

function storable(text: string): string {
  return text.replace(UNSTORABLE, '\uFFFD');
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
