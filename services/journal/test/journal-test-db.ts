import { NATS_URL, eventually } from '@toolgate/testing';
import { sql, type Kysely } from 'kysely';
import { loadJournalConfig, type JournalConfig } from '../src/config';
import { createDb } from '../src/db/create-db';
import type { Database } from '../src/db/database';

export { useJournalDb, type JournalTestDb } from './journal-db';

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
