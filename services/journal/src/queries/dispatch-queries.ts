import {
  DISPATCH_REPLY_BUDGET_BYTES,
  DISPATCH_VALUE_CHUNK_CHARS,
  elidedValue,
  parseJournalEvent,
  type DispatchValueChunk,
  type DispatchValuePart,
  type JournalEvent,
} from '@toolgate/contracts';
import { sql } from 'kysely';
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

/**
 * A dispatch with its whole history, oldest event first. The values `elided` names stand as an
 * `ElidedValue` wherever they appear (see `dispatch-values.ts` in the contracts).
 */
export interface DispatchWithHistory {
  dispatch: DispatchView;
  events: RecordedEvent[];
  elided: DispatchValuePart[];
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
  return bounded({
    dispatch: { ...dispatchFromRow(row), lastSeq: row.last_seq, eventCount: row.event_count },
    events,
    elided: [],
  });
}

/** Where each elidable value appears: its dispatch field and the events' fields that copy it. */
const COPIES: Readonly<Record<DispatchValuePart, readonly (readonly [string, string])[]>> = {
  input: [['requested', 'input']],
  effectiveInput: [
    ['decided', 'input'],
    ['suspended', 'input'],
  ],
  result: [['settled', 'result']],
};

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? null));

/**
 * The answer within {@link DISPATCH_REPLY_BUDGET_BYTES}: while it is over, its largest remaining
 * value (input, post-hook input, result) is replaced by its preview everywhere it appears. Every
 * other field is bounded by the events' schemas, so this always ends within the budget.
 */
function bounded(answer: DispatchWithHistory): DispatchWithHistory {
  if (bytesOf(answer) <= DISPATCH_REPLY_BUDGET_BYTES) return answer;
  const parts = (Object.keys(COPIES) as DispatchValuePart[])
    .map((part) => ({ part, bytes: bytesOf(answer.dispatch[part]) }))
    .sort((a, b) => b.bytes - a.bytes);
  let current = answer;
  for (const { part } of parts) {
    const stand = elidedValue(current.dispatch[part]);
    const copies = COPIES[part];
    current = {
      dispatch: { ...current.dispatch, [part]: stand },
      events: current.events.map((recorded) => {
        const field = copies.find(([type]) => type === recorded.event.type)?.[1];
        return field ? { ...recorded, event: { ...recorded.event, [field]: stand } } : recorded;
      }),
      elided: [...current.elided, part],
    };
    if (bytesOf(current) <= DISPATCH_REPLY_BUDGET_BYTES) break;
  }
  return current;
}

/** The column of each elidable value. */
const COLUMNS = {
  input: 'input',
  effectiveInput: 'effective_input',
  result: 'result',
} as const satisfies Record<DispatchValuePart, string>;

/**
 * One chunk of one of a dispatch's values as JSON text (PostgreSQL's rendering of it: the chunks
 * joined parse to the value), from `offset` in code points; undefined when the tenant has no such
 * dispatch. A value the dispatch does not have is `null`.
 */
export async function getDispatchValue(
  db: Db,
  tenant: string,
  dispatchId: string,
  part: DispatchValuePart,
  offset: number,
): Promise<DispatchValueChunk | undefined> {
  const text = sql<string>`coalesce(${sql.ref(COLUMNS[part])}::text, 'null')`;
  const row = await db
    .selectFrom('dispatches')
    .select([
      sql<string>`substr(${text}, ${offset + 1}, ${DISPATCH_VALUE_CHUNK_CHARS})`.as('chunk'),
      sql<string>`length(${text})`.as('length'),
    ])
    .where('tenant', '=', tenant)
    .where('dispatch_id', '=', dispatchId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const length = Number(row.length);
  const end = offset + DISPATCH_VALUE_CHUNK_CHARS;
  return {
    dispatchId,
    part,
    offset,
    length,
    text: row.chunk,
    nextOffset: end < length ? end : null,
  };
}
