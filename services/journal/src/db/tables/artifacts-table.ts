import type { ColumnType, Selectable } from 'kysely';
import type { Json } from './json-column';

/** `artifacts`: patch artifacts collected from worktrees (stored elsewhere; this is the index). */
export interface ArtifactsTable {
  tenant: string;
  /** Where the artifact is stored (object-store key); with `tenant`, the primary key. */
  ref: string;
  worktree_id: string;
  run_id: string;
  kind: string;
  base_commit: string;
  bytes: number;
  sha256: string;
  files: Json;
  created_at: ColumnType<Date, string, string>;
  seq: number;
}

export type ArtifactRow = Selectable<ArtifactsTable>;
