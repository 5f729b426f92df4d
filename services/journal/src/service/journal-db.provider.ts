import type { Kysely } from 'kysely';
import type { Database } from '../db/database';

export const JOURNAL_DB = Symbol('JOURNAL_DB');

/** The journal's database handle as providers see it. */
export interface JournalDbHandle {
  db: Kysely<Database>;
}
