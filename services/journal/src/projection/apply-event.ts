import type { JournalEvent, WorktreeEvent } from '@toolgate/contracts';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database';
import { evolveApproval, isApprovalEvent, type ApprovalEvent } from './approval-fold';
import {
  evolveDispatch,
  isDispatchEvent,
  laterInstant,
  type DispatchEvent,
  type DispatchState,
} from './dispatch-fold';
import {
  APPROVAL_ROWS,
  DISPATCH_ROWS,
  WORKTREE_ROWS,
  insertArtifacts,
  insertAuditEntries,
  loadForUpdate,
  lockProjectionKeys,
  rowKey,
  saveFolded,
  touchRuns,
  type CollectedArtifact,
  type FoldedTable,
  type ProjectionKey,
  type RunTouch,
  type Stored,
} from './projection-repository';
import { evolveWorktree, isWorktreeEvent } from './worktree-fold';

/** A journal event as read from the stream: the event, its stream and its sequence there. */
export interface JournalEntry {
  event: JournalEvent;
  seq: number;
  stream: string;
}

/** `applied`: the projection changed; `duplicate`: this stream sequence was already applied. */
export type ApplyOutcome = 'applied' | 'duplicate';

/**
 * Folds one journal event into the projection, exactly once per stream sequence.
 *
 * In one transaction: the event is recorded in `audit_log` under its (stream, sequence) primary
 * key with `on conflict do nothing`; when nothing was inserted, the event was applied before (a
 * redelivery, or a rebuild over a live table) and nothing else is touched. Otherwise the affected
 * rows are loaded under a per-key lock, folded with the pure `evolve*` functions and written back.
 * A failure anywhere rolls everything back, audit row included, so a redelivery applies it again.
 *
 * Given a `Transaction`, it runs inside it (the caller commits); given a `Kysely`, it opens one.
 */
export async function applyEvent(db: Db, entry: JournalEntry): Promise<ApplyOutcome> {
  const apply = async (trx: Transaction<Database>) =>
    (await applyEvents(trx, [entry])) === 1 ? 'applied' : 'duplicate';
  if (db.isTransaction) return apply(db as Transaction<Database>);
  return (db as Kysely<Database>).transaction().execute(apply);
}

/**
 * Folds a run of events (in stream order) inside the caller's transaction, with the same result as
 * `applyEvent` on each in turn, in fewer round trips: the audit rows go in with one statement; every
 * dispatch and worktree touched is locked with one statement, and each table's rows are loaded and
 * saved with one statement each, every row with all of its new events folded in memory in stream
 * order; each run is counted once. Sequences already recorded (and repeats within the run) are
 * skipped, as `applyEvent` would report them `duplicate`. Returns how many events were applied.
 *
 * `onDispatch` sees each dispatch row the run changed, before and after (undefined before: a new
 * row), for the metrics measured from it (`dispatch-measurements.ts`); it is only told about
 * events applied now, never about duplicates, and what it learns holds only if the caller commits.
 */
export async function applyEvents(
  trx: Transaction<Database>,
  entries: readonly JournalEntry[],
  onDispatch?: (before: DispatchState | undefined, after: DispatchState) => void,
): Promise<number> {
  const unique = new Map<string, JournalEntry>();
  for (const entry of entries) {
    const key = `${entry.stream}/${entry.seq}`;
    if (!unique.has(key)) unique.set(key, entry);
  }
  const inserted = await insertAuditEntries(trx, [...unique.values()]);
  const fresh = [...unique].filter(([key]) => inserted.has(key)).map(([, entry]) => entry);

  const dispatches = new RowEvents<DispatchEvent>();
  const approvals = new RowEvents<ApprovalEvent>();
  const worktrees = new RowEvents<WorktreeEvent>();
  const collected: CollectedArtifact[] = [];
  for (const { event, seq } of fresh) {
    if (isDispatchEvent(event)) {
      const key = { tenant: event.tenant, id: event.dispatchId };
      dispatches.add(key, event, seq);
      if (isApprovalEvent(event)) approvals.add(key, event, seq);
    } else if (isWorktreeEvent(event)) {
      worktrees.add({ tenant: event.tenant, id: event.worktreeId }, event, seq);
      if (event.type === 'worktree-collected') {
        const { tenant, runId, worktreeId, artifact, at } = event;
        collected.push({ tenant, runId, worktreeId, artifact, at, seq });
      }
    }
  }

  // An approval belongs to its dispatch: the dispatch's lock covers it.
  await lockProjectionKeys(trx, [...dispatches.keys(), ...worktrees.keys()]);

  await foldRows(trx, DISPATCH_ROWS, dispatches, (stored, events) => {
    const folded = {
      ...fold(stored, events, evolveDispatch),
      eventCount: (stored?.eventCount ?? 0) + events.length,
    };
    onDispatch?.(stored?.state, folded.state);
    return folded;
  });
  await foldRows(trx, APPROVAL_ROWS, approvals, (stored, events) =>
    fold(stored, events, evolveApproval),
  );
  await foldRows(trx, WORKTREE_ROWS, worktrees, (stored, events) =>
    fold(stored, events, evolveWorktree),
  );
  await insertArtifacts(trx, collected);
  // A script install is journaled under a run id of its own, not an agent's run: no run row.
  // Last before the commit: a run's row is shared by every batch that touches the run, and its
  // lock is held from here to the commit.
  await touchRuns(trx, runTouches(fresh.filter(({ event }) => event.type !== 'script-installed')));
  return fresh.length;
}

/** Events grouped by the projection row they fold into, rows in order of first appearance. */
class RowEvents<E> {
  private readonly rows = new Map<
    string,
    { key: ProjectionKey; events: { event: E; seq: number }[] }
  >();

  add(key: ProjectionKey, event: E, seq: number): void {
    const id = rowKey(key.tenant, key.id);
    const row = this.rows.get(id);
    if (row) row.events.push({ event, seq });
    else this.rows.set(id, { key, events: [{ event, seq }] });
  }

  keys(): ProjectionKey[] {
    return [...this.rows.values()].map((row) => row.key);
  }

  map<R>(fn: (key: string, events: readonly { event: E; seq: number }[]) => R): R[] {
    return [...this.rows].map(([id, row]) => fn(id, row.events));
  }
}

/** Loads the rows the events touch, folds each row's events into it and saves them, per table. */
async function foldRows<T extends 'dispatches' | 'approvals' | 'worktrees', S, E>(
  trx: Transaction<Database>,
  table: FoldedTable<T, S>,
  rows: RowEvents<E>,
  foldRow: (stored: S | undefined, events: readonly { event: E; seq: number }[]) => S,
): Promise<void> {
  const stored = await loadForUpdate(trx, table, rows.keys());
  await saveFolded(
    trx,
    table,
    rows.map((key, events) => foldRow(stored.get(key), events)),
  );
}

/** A row's stored state with its new events folded in, in order. */
function fold<S, E>(
  stored: Stored<S> | undefined,
  events: readonly { event: E; seq: number }[],
  evolve: (state: S | undefined, event: E) => S,
): Stored<S> {
  let state = stored?.state;
  let lastSeq = stored?.lastSeq ?? 0;
  for (const { event, seq } of events) {
    state = evolve(state, event);
    lastSeq = Math.max(lastSeq, seq);
  }
  // `events` is never empty: a row is only folded for the events that touched it.
  return { state: state!, lastSeq };
}

/**
 * What the events add to each of their runs' rows: the same as touching it once per event. In key
 * order, so two batches folded at once lock the runs they share in the same order (no deadlock).
 */
function runTouches(entries: readonly JournalEntry[]): RunTouch[] {
  const runs = new Map<string, RunTouch>();
  for (const { event, seq } of entries) {
    const key = rowKey(event.tenant, event.runId);
    const run = runs.get(key);
    if (!run) {
      runs.set(key, {
        tenant: event.tenant,
        runId: event.runId,
        firstAt: event.at,
        lastAt: event.at,
        eventCount: 1,
        lastSeq: seq,
      });
    } else {
      if (Date.parse(event.at) < Date.parse(run.firstAt)) run.firstAt = event.at;
      run.lastAt = laterInstant(run.lastAt, event.at);
      run.eventCount++;
      run.lastSeq = Math.max(run.lastSeq, seq);
    }
  }
  return [...runs.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}
