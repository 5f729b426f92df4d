import type { ColumnType, Selectable } from 'kysely';
import type { Json } from './json-column';

/**
 * `audit_log`: every journal event exactly as it was read from the stream, keyed by its stream
 * sequence. The row is inserted in the same transaction as the projection update it causes, so its
 * presence is the proof that the event was applied (exactly once per sequence).
 */
export interface AuditLogTable {
  /** The JetStream stream the event was read from; with `seq`, the primary key. */
  stream: string;
  /** The stream sequence (a JS number: sequences stay far below 2^53). */
  seq: number;
  event_id: string;
  type: string;
  tenant: string;
  run_id: string;
  /** The subject key: a dispatch id, or a worktree id for worktree events. */
  dispatch_id: string;
  at: ColumnType<Date, string, string>;
  event: Json;
}

export type AuditLogRow = Selectable<AuditLogTable>;
