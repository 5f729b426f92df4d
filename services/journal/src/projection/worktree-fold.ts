import type { JournalEvent, WorktreeEvent } from '@toolgate/contracts';
import { laterInstant } from './dispatch-fold';

/**
 * A managed worktree's lifecycle, as a pure fold of its worktree events (the subject key of a
 * worktree event is the worktree id). Order-insensitive like the dispatch fold: `status` is the
 * furthest stage reached, so a redelivered `acquired` never revives a disposed tree.
 *
 * `restarted` is published for the fresh tree of an agent whose retained tree was dropped; it names
 * the dropped tree and does not advance the lifecycle.
 */

export const WORKTREE_STATUSES = [
  'restarted',
  'acquired',
  'collected',
  'retained',
  'dropped',
  'disposed',
] as const;
export type WorktreeStatus = (typeof WORKTREE_STATUSES)[number];

export interface WorktreeState {
  tenant: string;
  worktreeId: string;
  runId: string;
  status: WorktreeStatus;
  agentKey: string | null;
  repo: string | null;
  baseRef: string | null;
  baseCommit: string | null;
  path: string | null;
  branch: string | null;
  reason: string | null;
  restartedFrom: string | null;
  acquiredAt: string | null;
  collectedAt: string | null;
  retainedAt: string | null;
  droppedAt: string | null;
  disposedAt: string | null;
  updatedAt: string;
}

const WORKTREE_EVENT_TYPES: ReadonlySet<JournalEvent['type']> = new Set<JournalEvent['type']>([
  'worktree-acquired',
  'worktree-collected',
  'worktree-retained',
  'worktree-dropped',
  'worktree-disposed',
  'worktree-restarted',
]);

export function isWorktreeEvent(event: JournalEvent): event is WorktreeEvent {
  return WORKTREE_EVENT_TYPES.has(event.type);
}

const statusOf = (event: WorktreeEvent): WorktreeStatus =>
  event.type.slice('worktree-'.length) as WorktreeStatus;
const rank = (status: WorktreeStatus): number => WORKTREE_STATUSES.indexOf(status);

/** Folds one event into a worktree's state. Pure. */
export function evolveWorktree(
  state: WorktreeState | undefined,
  event: WorktreeEvent,
): WorktreeState {
  const base: WorktreeState = state ?? {
    tenant: event.tenant,
    worktreeId: event.worktreeId,
    runId: event.runId,
    status: statusOf(event),
    agentKey: null,
    repo: null,
    baseRef: null,
    baseCommit: null,
    path: null,
    branch: null,
    reason: null,
    restartedFrom: null,
    acquiredAt: null,
    collectedAt: null,
    retainedAt: null,
    droppedAt: null,
    disposedAt: null,
    updatedAt: event.at,
  };
  const incoming = statusOf(event);
  const next: WorktreeState = {
    ...base,
    status: rank(incoming) > rank(base.status) ? incoming : base.status,
    updatedAt: laterInstant(base.updatedAt, event.at),
  };
  switch (event.type) {
    case 'worktree-acquired':
      return {
        ...next,
        agentKey: event.agentKey,
        repo: event.repo,
        baseRef: event.baseRef,
        baseCommit: event.baseCommit,
        path: event.path,
        branch: event.branch,
        acquiredAt: event.at,
      };
    case 'worktree-collected':
      // Collect can run more than once; the artifacts table keeps every patch.
      return { ...next, collectedAt: laterOrSelf(next.collectedAt, event.at) };
    case 'worktree-retained':
      return {
        ...next,
        reason: next.droppedAt === null ? event.reason : next.reason,
        retainedAt: event.at,
      };
    case 'worktree-dropped':
      // The drop reason outranks the retain reason: it explains why the tree is gone.
      return { ...next, reason: event.reason, droppedAt: event.at };
    case 'worktree-disposed':
      return { ...next, disposedAt: event.at };
    case 'worktree-restarted':
      return {
        ...next,
        agentKey: next.agentKey ?? event.agentKey,
        restartedFrom: event.droppedWorktreeId,
      };
  }
}

function laterOrSelf(current: string | null, at: string): string {
  return current === null ? at : laterInstant(current, at);
}
