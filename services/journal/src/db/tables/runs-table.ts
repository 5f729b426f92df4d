import type { ColumnType, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, string, string>;

/**
 * `runs`: one row per run that has any event. Its status is not stored: it is derived from the
 * run's dispatches when read (`queries/run-queries.ts`), so it can never disagree with them.
 */
export interface RunsTable {
  tenant: string;
  run_id: string;
  first_at: Timestamp;
  last_at: Timestamp;
  event_count: number;
  last_seq: number;
}

export type RunRow = Selectable<RunsTable>;
