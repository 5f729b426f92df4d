import type { Migration, MigrationProvider } from 'kysely';
import * as createProjection from './migrations/20261130T013716-create-projection.migration';

/**
 * Every migration, listed in code rather than found by scanning a folder, so the compiled `dist`
 * (and a bundled build) runs exactly the migrations it was built with. Keys are timestamp-named:
 * kysely applies them in key order.
 */
export const JOURNAL_MIGRATIONS: Readonly<Record<string, Migration>> = Object.freeze({
  '20261130T013716_create_projection': createProjection,
});

/** A kysely {@link MigrationProvider} over {@link JOURNAL_MIGRATIONS}. */
export const journalMigrationProvider: MigrationProvider = {
  getMigrations: async () => ({ ...JOURNAL_MIGRATIONS }),
};
