import { parseJournalEvent, type JournalEvent } from '@toolgate/contracts';
import { inSnapshot, type Db } from '../db/database';
import type { DispatchState } from '../projection/dispatch-fold';
import { dispatchFromRow } from '../projection/projection-repository';

/** A dispatch as the read side serves it: its folded state plus where in the stream it stands. */
export interface DispatchView extends DispatchState {
  lastSeq: number;
  eventCount: number;
}

/** One recorded event with its stream position. */
export interface RecordedEvent {
  stream: string;
  seq: number;
  event: JournalEvent;
}

/** A dispatch with its whole history, oldest event first. */
export interface DispatchWithHistory {
  dispatch: DispatchView;
  events: RecordedEvent[];
}

/**
 * One dispatch of one tenant with every event recorded for it, in stream order; undefined when the
 * tenant has no such dispatch (another tenant's dispatch of the same id is not visible).
 */
export function getDispatch(
  db: Db,
  tenant: string,
  dispatchId: string,
): Promise<DispatchWithHistory | undefined> {
  // The row and its history from one snapshot: a fold committing between the two reads would show
  // a history ahead of the state it is the history of.
  return inSnapshot(db, (trx) => readDispatch(trx, tenant, dispatchId));
}

async function readDispatch(
  db: Db,
  tenant: string,
  dispatchId: string,
): Promise<DispatchWithHistory | undefined> {
  const row = await db
    .selectFrom('dispatches')
    .selectAll()
    .where('tenant', '=', tenant)
    .where('dispatch_id', '=', dispatchId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const history = await db
    .selectFrom('audit_log')
    .select(['stream', 'seq', 'event'])
    .where('tenant', '=', tenant)
    .where('dispatch_id', '=', dispatchId)
    .orderBy('seq')
    .execute();
  const events: RecordedEvent[] = [];
  for (const entry of history) {
    // Only events that parsed were ever recorded; a row that no longer parses means the schema
    // moved on without a migration, which is worth failing loudly over rather than hiding.
    const event = parseJournalEvent(entry.event);
    if (event === null)
      throw new Error(`audit_log ${entry.stream}#${entry.seq} no longer parses as a journal event`);
    events.push({ stream: entry.stream, seq: entry.seq, event });
  }
  return {
    dispatch: { ...dispatchFromRow(row), lastSeq: row.last_seq, eventCount: row.event_count },
    events,
  };
}
