import type { JournalEvent, WorktreeEvent } from '@toolgate/contracts';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database';
import {
  evolveApproval,
  isApprovalEvent,
  type ApprovalEvent,
  type ApprovalState,
} from './approval-fold';
import {
  evolveDispatch,
  isDispatchEvent,
  type DispatchEvent,
  type DispatchState,
} from './dispatch-fold';
import {
  insertArtifact,
  insertAuditEntries,
  loadApprovalsForUpdate,
  loadDispatchesForUpdate,
  loadWorktreeForUpdate,
  lockProjectionKey,
  lockProjectionKeys,
  saveApprovals,
  saveDispatches,
  saveWorktree,
  touchRuns,
  type RowMeta,
  type RunTouch,
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
 * `applyEvent` on each in turn, in fewer round trips: the audit rows go in with one statement, and
 * each dispatch, approval and worktree touched is locked, loaded and saved once with all of its new
 * events folded in memory in stream order; each run is counted once. Sequences already recorded
 * (and repeats within the run) are skipped, as `applyEvent` would report them `duplicate`.
 */
export async function applyEvents(
  trx: Transaction<Database>,
  entries: readonly JournalEntry[],
): Promise<number> {
  const unique = new Map<string, JournalEntry>();
  for (const entry of entries) {
    const key = `${entry.stream}/${entry.seq}`;
    if (!unique.has(key)) unique.set(key, entry);
  }
  const inserted = await insertAuditEntries(trx, [...unique.values()]);
  const fresh = [...unique].filter(([key]) => inserted.has(key)).map(([, entry]) => entry);

  const dispatches = new Map<string, { event: DispatchEvent; seq: number }[]>();
  const worktrees = new Map<string, { event: WorktreeEvent; seq: number }[]>();
  const runs = new Map<string, RunTouch>();
  for (const { event, seq } of fresh) {
    if (isDispatchEvent(event)) {
      groupInto(dispatches, `${event.tenant}\u0000${event.dispatchId}`, { event, seq });
    } else if (isWorktreeEvent(event)) {
      groupInto(worktrees, `${event.tenant}\u0000${event.worktreeId}`, { event, seq });
    }
    const runKey = `${event.tenant}\u0000${event.runId}`;
    const run = runs.get(runKey);
    if (!run) {
      runs.set(runKey, {
        tenant: event.tenant,
        runId: event.runId,
        firstAt: event.at,
        lastAt: event.at,
        eventCount: 1,
        lastSeq: seq,
      });
    } else {
      if (Date.parse(event.at) < Date.parse(run.firstAt)) run.firstAt = event.at;
      if (Date.parse(event.at) > Date.parse(run.lastAt)) run.lastAt = event.at;
      run.eventCount++;
      run.lastSeq = Math.max(run.lastSeq, seq);
    }
  }

  // All the run's dispatches are locked (in order of first appearance) and loaded up front.
  const groups = [...dispatches.values()];
  await lockProjectionKeys(
    trx,
    groups.map((group) => ({ tenant: group[0]!.event.tenant, key: group[0]!.event.dispatchId })),
  );
  const byTenant = new Map<string, string[]>();
  for (const group of groups)
    groupInto(byTenant, group[0]!.event.tenant, group[0]!.event.dispatchId);
  const storedDispatches = new Map<string, { state: DispatchState; meta: RowMeta }>();
  for (const [tenant, ids] of byTenant) {
    for (const [id, stored] of await loadDispatchesForUpdate(trx, tenant, ids)) {
      storedDispatches.set(`${tenant}\u0000${id}`, stored);
    }
  }

  const savedDispatches: { state: DispatchState; meta: RowMeta }[] = [];
  const approvalGroups: {
    tenant: string;
    dispatchId: string;
    events: { event: ApprovalEvent; seq: number }[];
  }[] = [];
  for (const group of groups) {
    const { tenant, dispatchId } = group[0]!.event;
    const stored = storedDispatches.get(`${tenant}\u0000${dispatchId}`);
    let state = stored?.state;
    let lastSeq = stored?.meta.lastSeq ?? 0;
    for (const { event, seq } of group) {
      state = evolveDispatch(state, event);
      lastSeq = Math.max(lastSeq, seq);
    }
    savedDispatches.push({
      state: state!,
      meta: { lastSeq, eventCount: (stored?.meta.eventCount ?? 0) + group.length },
    });
    const approvalEvents = group.filter(
      (g): g is { event: ApprovalEvent & DispatchEvent; seq: number } => isApprovalEvent(g.event),
    );
    if (approvalEvents.length) approvalGroups.push({ tenant, dispatchId, events: approvalEvents });
  }
  await saveDispatches(trx, savedDispatches);

  // Approvals of the run's dispatches (already locked with them), loaded and saved at once.
  const approvalIds = new Map<string, string[]>();
  for (const { tenant, dispatchId } of approvalGroups) groupInto(approvalIds, tenant, dispatchId);
  const storedApprovals = new Map<string, { state: ApprovalState; lastSeq: number }>();
  for (const [tenant, ids] of approvalIds) {
    for (const [id, stored] of await loadApprovalsForUpdate(trx, tenant, ids)) {
      storedApprovals.set(`${tenant}\u0000${id}`, stored);
    }
  }
  const savedApprovals: { state: ApprovalState; lastSeq: number }[] = [];
  for (const { tenant, dispatchId, events } of approvalGroups) {
    const stored = storedApprovals.get(`${tenant}\u0000${dispatchId}`);
    let state = stored?.state;
    let lastSeq = stored?.lastSeq ?? 0;
    for (const { event, seq } of events) {
      state = evolveApproval(state, event);
      lastSeq = Math.max(lastSeq, seq);
    }
    savedApprovals.push({ state: state!, lastSeq });
  }
  await saveApprovals(trx, savedApprovals);

  for (const group of worktrees.values()) {
    const { tenant, worktreeId } = group[0]!.event;
    await lockProjectionKey(trx, tenant, worktreeId);
    const stored = await loadWorktreeForUpdate(trx, tenant, worktreeId);
    let state = stored?.state;
    let lastSeq = stored?.lastSeq ?? 0;
    for (const { event, seq } of group) {
      state = evolveWorktree(state, event);
      lastSeq = Math.max(lastSeq, seq);
    }
    await saveWorktree(trx, state!, lastSeq, stored !== undefined);
    for (const { event, seq } of group) {
      if (event.type === 'worktree-collected') {
        await insertArtifact(trx, {
          tenant: event.tenant,
          runId: event.runId,
          worktreeId: event.worktreeId,
          artifact: event.artifact,
          at: event.at,
          seq,
        });
      }
    }
  }

  await touchRuns(trx, [...runs.values()]);
  return fresh.length;
}

function groupInto<T>(groups: Map<string, T[]>, key: string, item: T): void {
  const group = groups.get(key);
  if (group) group.push(item);
  else groups.set(key, [item]);
}
