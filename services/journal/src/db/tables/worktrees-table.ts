import type { ColumnType, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, string, string>;
type NullableTimestamp = ColumnType<Date | null, string | null, string | null>;

/** `worktrees`: the lifecycle of each managed worktree, folded by `projection/worktree-fold.ts`. */
export interface WorktreesTable {
  tenant: string;
  worktree_id: string;
  run_id: string;
  /** restarted | acquired | collected | retained | dropped | disposed */
  status: string;
  agent_key: string | null;
  repo: string | null;
  base_ref: string | null;
  base_commit: string | null;
  path: string | null;
  branch: string | null;
  /** Why it was retained (keep-on-error) or dropped (pin-cap, stale, missing). */
  reason: string | null;
  /** The dropped worktree this one replaced when its agent was restarted. */
  restarted_from: string | null;
  acquired_at: NullableTimestamp;
  collected_at: NullableTimestamp;
  retained_at: NullableTimestamp;
  dropped_at: NullableTimestamp;
  disposed_at: NullableTimestamp;
  updated_at: Timestamp;
  last_seq: number;
}

export type WorktreeRow = Selectable<WorktreesTable>;
