import { NATS_URL, eventually, useTestSchema } from '@toolgate/testing';
import { sql, type Kysely } from 'kysely';
import { loadJournalConfig, type JournalConfig } from '../src/config';
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

/**
 * A journal service's configuration for a test: the shared broker under `prefix`, the projection in
 * `database.schema` at `database.url`, any port, events folded as they come (no linger); `env`
 * adds to it or overrides it.
 */
export function testJournalConfig(
  prefix: string,
  database: { url: string; schema: string },
  env: Record<string, string> = {},
): JournalConfig {
  return loadJournalConfig({
    NATS_URL,
    TOOLGATE_PREFIX: prefix,
    JOURNAL_PORT: '0',
    DATABASE_URL: database.url,
    JOURNAL_SCHEMA: database.schema,
    JOURNAL_BATCH_LINGER_MS: '0',
    ...env,
  });
}
