import type { ColumnType, Selectable } from 'kysely';
import type { Json } from './json-column';

type Timestamp = ColumnType<Date, string, string>;
type NullableTimestamp = ColumnType<Date | null, string | null, string | null>;

/**
 * `dispatches`: one row per dispatch, the folded state of its journal events
 * (`projection/dispatch-fold.ts`). Columns a later event supplies stay null until it arrives.
 */
export interface DispatchesTable {
  tenant: string;
  dispatch_id: string;
  run_id: string;
  /** requested | decided | suspended | resolved | started | settled */
  status: string;
  call_id: string | null;
  tool_name: string | null;
  /** The ToolRef the dispatch was requested (or decided) with. */
  tool: Json | null;
  /** The caller's input as requested. */
  input: Json | null;
  /** The post-hook input the verdict was reached on: what `execute` receives. */
  effective_input: Json | null;
  agent: Json | null;
  isolation: Json | null;
  profile: string | null;
  taint: string | null;
  submitted_by: string | null;
  retry_of: string | null;
  retry_depth: number | null;
  /** `requested.traceId` (migration 20261206T053500). */
  trace_id: string | null;
  verdict: string | null;
  decided_by: string | null;
  rule: Json | null;
  reason: string | null;
  policy_revision: number | null;
  input_digest: string | null;
  approval_key: string | null;
  expires_at: NullableTimestamp;
  decision: string | null;
  resolved_by: string | null;
  resolution_source: string | null;
  resolution_reason: string | null;
  attempt: number | null;
  executor: string | null;
  cwd: string | null;
  outcome: string | null;
  result: Json | null;
  error: Json | null;
  duration_ms: number | null;
  requested_at: NullableTimestamp;
  decided_at: NullableTimestamp;
  suspended_at: NullableTimestamp;
  resolved_at: NullableTimestamp;
  started_at: NullableTimestamp;
  settled_at: NullableTimestamp;
  /** The latest `at` of the events folded so far. */
  updated_at: Timestamp;
  /** The highest stream sequence folded into this row. */
  last_seq: number;
  event_count: number;
}

export type DispatchRow = Selectable<DispatchesTable>;
