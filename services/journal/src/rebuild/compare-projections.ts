import { canonicalJson } from '@toolgate/contracts';
import type { Kysely } from 'kysely';
import {
  PRIMARY_KEYS,
  PROJECTION_TABLES,
  type Database,
  type ProjectionTable,
} from '../db/database';

/** One row that differs between two projections. */
export type ProjectionDifference =
  | { table: ProjectionTable; key: string; kind: 'missing-in-a' | 'missing-in-b' }
  | {
      table: ProjectionTable;
      key: string;
      kind: 'changed';
      columns: { column: string; a: unknown; b: unknown }[];
    };

/**
 * Compares two projections table by table, row by row (matched by primary key), column by column.
 * Timestamps compare as instants and JSON columns canonically, so equal facts stored through two
 * different drivers compare equal. Returns every difference; an empty list means equal.
 *
 * Reads whole tables: meant for tests and for checking a rebuild before switching to it.
 */
export async function compareProjections(
  a: Kysely<Database>,
  b: Kysely<Database>,
  tables: readonly ProjectionTable[] = PROJECTION_TABLES,
): Promise<ProjectionDifference[]> {
  const differences: ProjectionDifference[] = [];
  for (const table of tables) {
    const [rowsA, rowsB] = await Promise.all([readTable(a, table), readTable(b, table)]);
    for (const [key, rowA] of rowsA) {
      const rowB = rowsB.get(key);
      if (rowB === undefined) {
        differences.push({ table, key, kind: 'missing-in-b' });
        continue;
      }
      const columns = [...new Set([...Object.keys(rowA), ...Object.keys(rowB)])]
        .filter((column) => rowA[column] !== rowB[column])
        .map((column) => ({ column, a: rowA[column], b: rowB[column] }));
      if (columns.length > 0) differences.push({ table, key, kind: 'changed', columns });
    }
    for (const key of rowsB.keys()) {
      if (!rowsA.has(key)) differences.push({ table, key, kind: 'missing-in-a' });
    }
  }
  return differences;
}

/** A projection as plain JSON: each table's rows in primary-key order (see {@link projectionSnapshot}). */
export type ProjectionSnapshot = { [T in ProjectionTable]?: Record<string, unknown>[] };

/**
 * The whole projection as plain JSON, for a committed snapshot: each table's rows in primary-key
 * order, timestamps as ISO instants, JSON columns as JSON values (keys sorted). Two projections of
 * the same facts give equal snapshots, whatever driver stored them.
 *
 * Reads whole tables: meant for tests and fixtures.
 */
export async function projectionSnapshot(
  db: Kysely<Database>,
  tables: readonly ProjectionTable[] = PROJECTION_TABLES,
): Promise<ProjectionSnapshot> {
  const snapshot: ProjectionSnapshot = {};
  for (const table of tables) {
    const keyColumns: readonly string[] = PRIMARY_KEYS[table];
    const rows = (await readRows(db, table)).map((row) =>
      Object.fromEntries(Object.entries(row).map(([column, value]) => [column, plain(value)])),
    );
    snapshot[table] = rows.sort((x, y) => {
      for (const column of keyColumns) {
        const [a, b] = [x[column], y[column]] as [string | number, string | number];
        if (a !== b) return a < b ? -1 : 1;
      }
      return 0;
    });
  }
  return snapshot;
}

function plain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'object') return JSON.parse(canonicalJson(value)) as unknown;
  return value;
}

type NormalisedRow = Record<string, string | number | boolean | null>;

async function readRows(
  db: Kysely<Database>,
  table: ProjectionTable,
): Promise<Record<string, unknown>[]> {
  // The table name comes from the closed list above, never from input.
  return (await db.selectFrom(table).selectAll().execute()) as Record<string, unknown>[];
}

async function readTable(
  db: Kysely<Database>,
  table: ProjectionTable,
): Promise<Map<string, NormalisedRow>> {
  const keyColumns: readonly string[] = PRIMARY_KEYS[table];
  const rows = await readRows(db, table);
  const byKey = new Map<string, NormalisedRow>();
  for (const row of rows) {
    const normalised: NormalisedRow = {};
    for (const [column, value] of Object.entries(row)) normalised[column] = normalise(value);
    byKey.set(canonicalJson(keyColumns.map((column) => normalised[column] ?? null)), normalised);
  }
  return byKey;
}

function normalise(value: unknown): string | number | boolean | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
    return value;
  return canonicalJson(value);
}
