import type { ColumnType, Selectable } from 'kysely';
import type { Json } from './json-column';

type Timestamp = ColumnType<Date, string, string>;
type NullableTimestamp = ColumnType<Date | null, string | null, string | null>;

/**
 * `approvals`: one row per suspended dispatch (a dispatch can be suspended once, so the key is the
 * dispatch), found by its approval key. Folded by `projection/approval-fold.ts`.
 */
export interface ApprovalsTable {
  tenant: string;
  dispatch_id: string;
  run_id: string;
  /** sha256 of tool name + canonical post-hook input. Not unique: identical calls share it. */
  approval_key: string;
  input_digest: string;
  policy_revision: number;
  /** pending | resolved */
  status: string;
  tool_name: string | null;
  tool: Json | null;
  input: Json | null;
  agent: Json | null;
  isolation: Json | null;
  profile: string | null;
  decided_by: string | null;
  rule: Json | null;
  submitted_by: string | null;
  on_timeout: string | null;
  separation_of_duties: boolean | null;
  suspended_at: NullableTimestamp;
  expires_at: NullableTimestamp;
  decision: string | null;
  reason: string | null;
  resolved_by: string | null;
  source: string | null;
  resolved_at: NullableTimestamp;
  updated_at: Timestamp;
  last_seq: number;
}

export type ApprovalRow = Selectable<ApprovalsTable>;
