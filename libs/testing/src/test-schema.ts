import pg from 'pg';
import { DATABASE_URL, uniqueName } from './names';

export interface TestSchema {
  schema: string;
  /** A pool whose connections use the schema as their search path. */
  pool: pg.Pool;
  /** The connection string of the database (the schema is set through `options`). */
  url: string;
  /** Drops the schema with everything in it and ends the pool. */
  cleanup(): Promise<void>;
}

/** A PostgreSQL schema of this test's own, created now and dropped by `cleanup`. */
export async function useTestSchema(label: string): Promise<TestSchema> {
  const schema = uniqueName(label);
  await adminQuery(`create schema "${schema}"`);
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    options: `-c search_path="${schema}"`,
    max: 4,
  });
  return {
    schema,
    pool,
    url: DATABASE_URL,
    async cleanup() {
      await pool.end();
      await adminQuery(`drop schema if exists "${schema}" cascade`);
    },
  };
}

/** One statement on a connection of its own, outside any test schema. */
async function adminQuery(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}
