import { hasErrorCode } from '@toolgate/contracts';
import { useTestSchema, type TestSchema } from '@toolgate/testing';
import { sql } from 'kysely';
import { createDb } from './create-db';
import { MIGRATION_TABLE } from './migrate-to-latest';
import { JOURNAL_MIGRATIONS } from './migration-provider';

describe('createDb (PostgreSQL)', () => {
  let schema: TestSchema;
  beforeEach(async () => {
    schema = await useTestSchema('createdb');
  });
  afterEach(async () => {
    await schema.cleanup();
  });

  it('replicas starting at once migrate the schema once, under the migrator lock', async () => {
    const replicas = await Promise.all(
      Array.from({ length: 3 }, () =>
        createDb({ url: schema.url, schema: schema.schema, poolMax: 2 }),
      ),
    );
    try {
      const { rows } = await sql<{
        name: string;
      }>`select name from ${sql.table(`${schema.schema}.${MIGRATION_TABLE}`)}`.execute(
        replicas[0]!.db,
      );
      // Each migration applied exactly once.
      expect(rows.map((r) => r.name).sort()).toEqual(Object.keys(JOURNAL_MIGRATIONS).sort());
      expect(await replicas[1]!.db.selectFrom('dispatches').selectAll().execute()).toEqual([]);
    } finally {
      await Promise.all(replicas.map((r) => r.db.destroy()));
    }
  });

  it('refuses a schema name that is not a plain identifier, and a config with no database', async () => {
    const bad = await createDb({ url: schema.url, schema: 'x"; drop schema public; --' }).catch(
      (err: unknown) => err,
    );
    expect(hasErrorCode(bad, 'config')).toBe(true);
    const none = await createDb({}).catch((err: unknown) => err);
    expect(hasErrorCode(none, 'config')).toBe(true);
  });
});
