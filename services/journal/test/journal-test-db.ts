import { eventually, useTestSchema } from '@toolgate/testing';
import { sql, type Kysely } from 'kysely';
import { createDb } from '../src/db/create-db';
import type { Database } from '../src/db/database';

export interface JournalTestDb {
  db: Kysely<Database>;
  schema: string;
  cleanup(): Promise<void>;
}

/** A migrated journal projection in a PostgreSQL schema of this test's own. */
export async function useJournalDb(label = 'journal'): Promise<JournalTestDb> {
  const testSchema = await useTestSchema(label);
  try {
    const { db } = await createDb({ url: testSchema.url, schema: testSchema.schema, poolMax: 6 });
    return {
      db,
      schema: testSchema.schema,
      async cleanup() {
        await db.destroy();
        await testSchema.cleanup();
      },
    };
  } catch (err) {
    await testSchema.cleanup();
    throw err;
  }
}

/** Rows in the projection's `audit_log`: the search path's, or `schema`'s. */
export async function auditCount(db: Kysely<Database>, schema?: string): Promise<number> {
  const table = schema ? sql.table(`${schema}.audit_log`) : sql.table('audit_log');
  const r = await sql<{ n: number }>`select count(*)::int as n from ${table}`.execute(db);
  return r.rows[0]!.n;
}

/** Waits until the projection in this database schema holds exactly `count` audit rows. */
export async function untilAudited(
  target: { url: string; schema: string },
  count: number,
): Promise<void> {
  const { db } = await createDb({ url: target.url, schema: target.schema, migrate: false });
  try {
    await eventually(async () => ((await auditCount(db)) === count ? true : undefined));
  } finally {
    await db.destroy();
  }
}
