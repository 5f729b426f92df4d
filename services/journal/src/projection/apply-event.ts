import type { JournalEvent } from '@toolgate/contracts';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database';
import { evolveApproval, isApprovalEvent } from './approval-fold';
import { evolveDispatch, isDispatchEvent } from './dispatch-fold';
import {
  insertArtifact,
  insertAuditEntry,
  loadApprovalForUpdate,
  loadDispatchForUpdate,
  loadWorktreeForUpdate,
  lockProjectionKey,
  saveApproval,
  saveDispatch,
  saveWorktree,
  touchRun,
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
  if (db.isTransaction) return applyInTransaction(db as Transaction<Database>, entry);
  return (db as Kysely<Database>).transaction().execute((trx) => applyInTransaction(trx, entry));
}

async function applyInTransaction(
  trx: Transaction<Database>,
  entry: JournalEntry,
): Promise<ApplyOutcome> {
  const { event, seq } = entry;
  if (!(await insertAuditEntry(trx, entry))) return 'duplicate';

  if (isDispatchEvent(event)) {
    await lockProjectionKey(trx, event.tenant, event.dispatchId);
    const stored = await loadDispatchForUpdate(trx, event.tenant, event.dispatchId);
    const state = evolveDispatch(stored?.state, event);
    const meta = {
      lastSeq: Math.max(stored?.meta.lastSeq ?? 0, seq),
      eventCount: (stored?.meta.eventCount ?? 0) + 1,
    };
    await saveDispatch(trx, state, meta, stored !== undefined);

    if (isApprovalEvent(event)) {
      const approval = await loadApprovalForUpdate(trx, event.tenant, event.dispatchId);
      await saveApproval(
        trx,
        evolveApproval(approval?.state, event),
        Math.max(approval?.lastSeq ?? 0, seq),
        approval !== undefined,
      );
    }
  } else if (isWorktreeEvent(event)) {
    await lockProjectionKey(trx, event.tenant, event.worktreeId);
    const stored = await loadWorktreeForUpdate(trx, event.tenant, event.worktreeId);
    await saveWorktree(
      trx,
      evolveWorktree(stored?.state, event),
      Math.max(stored?.lastSeq ?? 0, seq),
      stored !== undefined,
    );
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

  await touchRun(trx, event, seq);
  return 'applied';
}
