import { useTestSchema } from '@toolgate/testing';
import type { Kysely } from 'kysely';
import { createDb } from '../src/db/create-db';
import type { Database } from '../src/db/database';

// Apart from journal-test-db.ts (which re-exports it) so that a spec needing only a database does
// not load the service's config, and with it @toolgate/service-kit (Nest, OpenTelemetry).

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
