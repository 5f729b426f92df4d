import pg from 'pg';
import { DATABASE_URL } from './names';
import { useTestSchema } from './test-schema';

async function schemaExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rowCount } = await client.query(
      'select 1 from information_schema.schemata where schema_name = $1',
      [name],
    );
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('useTestSchema on a real PostgreSQL', () => {
  it('creates a schema of its own, scopes its pool to it, and drops it on cleanup', async () => {
    const t = await useTestSchema('schema');
    let cleaned = false;
    try {
      expect(t.schema).toMatch(/^t_schema_[0-9a-f]{8}$/);
      expect(await schemaExists(t.schema)).toBe(true);

      // Unqualified names resolve inside the test's schema.
      await t.pool.query('create table probe (id int primary key)');
      await t.pool.query('insert into probe values (1)');
      const { rows } = await t.pool.query<{ schema: string }>(
        "select table_schema as schema from information_schema.tables where table_name = 'probe'",
      );
      expect(rows.map((r) => r.schema)).toContain(t.schema);
      const current = await t.pool.query<{ s: string }>('select current_schema() as s');
      expect(current.rows[0]!.s).toBe(t.schema);

      await t.cleanup();
      cleaned = true;
      expect(await schemaExists(t.schema)).toBe(false);
    } finally {
      if (!cleaned) await t.cleanup();
    }
  });

  it('gives two tests two different schemas', async () => {
    const [a, b] = await Promise.all([useTestSchema('same'), useTestSchema('same')]);
    try {
      expect(a.schema).not.toBe(b.schema);
      await a.pool.query('create table only_in_a (x int)');
      const inB = await b.pool.query("select to_regclass('only_in_a') as t");
      expect(inB.rows[0].t).toBeNull();
    } finally {
      await Promise.all([a.cleanup(), b.cleanup()]);
    }
  });
});
