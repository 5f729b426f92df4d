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

type NormalisedRow = Record<string, string | number | boolean | null>;

async function readTable(
  db: Kysely<Database>,
  table: ProjectionTable,
): Promise<Map<string, NormalisedRow>> {
  const keyColumns: readonly string[] = PRIMARY_KEYS[table];
  // The table name comes from the closed list above, never from input.
  const rows = (await db.selectFrom(table).selectAll().execute()) as Record<string, unknown>[];
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
