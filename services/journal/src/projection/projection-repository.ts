import type {
  AgentRef,
  DecidedBy,
  ExecutorKind,
  Isolation,
  JournalEvent,
  PatchArtifact,
  Taint,
  ToolRef,
  Verdict,
  WireError,
} from '@toolgate/contracts';
import { sql, type Selectable } from 'kysely';
import { PRIMARY_KEYS, type Database, type Db } from '../db/database';
import { fromJsonb, toIso } from '../db/jsonb';
import {
  insertFromRecordset,
  jsonCell,
  replaceOnConflict,
  type RecordsetRow,
  type TableSpec,
} from '../db/recordset';
import type { ApprovalRow } from '../db/tables/approvals-table';
import type { DispatchRow } from '../db/tables/dispatches-table';
import type { WorktreeRow } from '../db/tables/worktrees-table';
import type { ApprovalState } from './approval-fold';
import type { DispatchState, DispatchStatus } from './dispatch-fold';
import type { WorktreeState, WorktreeStatus } from './worktree-fold';

/**
 * Loads and saves the projection's rows: the thin adapter between the pure folds and kysely. Every
 * function takes a `Kysely` or a `Transaction`, and none of them decides anything.
 */

/** A projection row's identity: its tenant and its id there (a dispatch id or a worktree id). */
export interface ProjectionKey {
  tenant: string;
  id: string;
}

/** The map key the load functions file a row under. */
export function rowKey(tenant: string, id: string): string {
  return `${tenant}\u0000${id}`;
}

/** A row's folded state and the highest stream sequence folded into it. */
export interface Stored<S> {
  state: S;
  lastSeq: number;
}

/** A dispatch row also counts the events folded into it. */
export interface StoredDispatch extends Stored<DispatchState> {
  eventCount: number;
}

// ---------------------------------------------------------------------------------------------
// audit_log

/**
 * Records a run of events at their stream sequences in one statement; returns the `stream/seq`
 * keys that were inserted (those already recorded are left out).
 */
export async function insertAuditEntries(
  db: Db,
  entries: readonly { event: JournalEvent; seq: number; stream: string }[],
): Promise<Set<string>> {
  if (!entries.length) return new Set();
  const rows = entries.map(({ event, seq, stream }): RecordsetRow<'audit_log'> => ({
    stream,
    seq,
    event_id: event.id,
    type: event.type,
    tenant: event.tenant,
    run_id: event.runId,
    dispatch_id: event.dispatchId,
    at: event.at,
    event: jsonCell(event),
  }));
  const { rows: inserted } = await sql<{
    stream: string;
    seq: string | number;
  }>`${insertFromRecordset(
    AUDIT_LOG,
    rows,
  )} on conflict (stream, seq) do nothing returning stream, seq`.execute(db);
  return new Set(inserted.map((row) => `${row.stream}/${Number(row.seq)}`));
}

const AUDIT_LOG: TableSpec<'audit_log'> = {
  table: 'audit_log',
  columns: {
    stream: 'text',
    seq: 'bigint',
    event_id: 'text',
    type: 'text',
    tenant: 'text',
    run_id: 'text',
    dispatch_id: 'text',
    at: 'timestamptz',
    event: 'jsonb',
  },
};

/**
 * Serialises writers of these projection keys (dispatches and worktrees) until the transaction
 * ends, in one statement. A row lock cannot do this on its own: the first event of a key has no row
 * to lock yet. The locks are taken in name order, so two transactions locking overlapping keys
 * never wait on each other in a cycle (the names go over as one JSON text parameter, which every
 * driver passes alike).
 */
export async function lockProjectionKeys(db: Db, keys: readonly ProjectionKey[]): Promise<void> {
  if (!keys.length) return;
  const names = new Set(keys.map(({ tenant, id }) => `toolgate.journal/${tenant}/${id}`));
  await sql`select pg_advisory_xact_lock(hashtextextended(k.name, 0))
    from jsonb_array_elements_text(cast(cast(${JSON.stringify([...names].sort())} as text) as jsonb)) with ordinality as k(name, n)
    order by k.n`.execute(db);
}

// ---------------------------------------------------------------------------------------------
// folded rows: dispatches, approvals, worktrees

type FoldedTableName = 'dispatches' | 'approvals' | 'worktrees';

/** A table of folded rows: its record-set spec, and how a row becomes stored state and back. */
export interface FoldedTable<T extends FoldedTableName, S> {
  spec: TableSpec<T>;
  fromRow(row: Selectable<Database[T]>): S;
  toRow(stored: S): RecordsetRow<T>;
}

/**
 * The stored rows with these keys, locked for update, in one statement; filed by `rowKey`. The
 * caller holds the keys' locks (`lockProjectionKeys`).
 */
export async function loadForUpdate<T extends FoldedTableName, S>(
  db: Db,
  table: FoldedTable<T, S>,
  keys: readonly ProjectionKey[],
): Promise<Map<string, S>> {
  if (!keys.length) return new Map();
  const idColumn = PRIMARY_KEYS[table.spec.table][1]!; // after `tenant`
  // Per tenant `tenant = $t and id in (...)`: one scan of the primary key's index with `= any`,
  // where a row-value `(tenant, id) in ((..), ..)` plans an OR of one index probe per key.
  const byTenant = new Map<string, string[]>();
  for (const { tenant, id } of keys) byTenant.set(tenant, [...(byTenant.get(tenant) ?? []), id]);
  const { rows } = await sql<Selectable<Database[T]> & Record<string, unknown>>`select *
    from ${sql.table(table.spec.table)}
    where ${sql.join(
      [...byTenant].map(
        ([tenant, ids]) => sql`(tenant = ${tenant} and ${sql.ref(idColumn)} in (${sql.join(ids)}))`,
      ),
      sql` or `,
    )}
    for update`.execute(db);
  return new Map(
    rows.map((row) => [rowKey(String(row.tenant), String(row[idColumn])), table.fromRow(row)]),
  );
}

/**
 * Writes folded rows in one statement: new rows are inserted, existing ones replaced (the caller
 * holds their key locks and has folded from their stored state).
 */
export async function saveFolded<T extends FoldedTableName, S>(
  db: Db,
  table: FoldedTable<T, S>,
  rows: readonly S[],
): Promise<void> {
  if (!rows.length) return;
  await sql`${insertFromRecordset(table.spec, rows.map(table.toRow))} ${replaceOnConflict(table.spec)}`.execute(
    db,
  );
}

// ---------------------------------------------------------------------------------------------
// dispatches

export function dispatchFromRow(row: DispatchRow): DispatchState {
  return {
    tenant: row.tenant,
    runId: row.run_id,
    dispatchId: row.dispatch_id,
    status: row.status as DispatchStatus,
    callId: row.call_id,
    toolName: row.tool_name,
    tool: row.tool as ToolRef | null,
    input: fromJsonb(row.input),
    effectiveInput: fromJsonb(row.effective_input),
    agent: row.agent as AgentRef | null,
    isolation: row.isolation as Isolation | null,
    profile: row.profile,
    taint: row.taint as Taint | null,
    submittedBy: row.submitted_by,
    retryOf: row.retry_of,
    retryDepth: row.retry_depth,
    traceId: row.trace_id,
    verdict: row.verdict as Verdict | null,
    decidedBy: row.decided_by as DecidedBy | null,
    rule: fromJsonb(row.rule),
    reason: row.reason,
    policyRevision: row.policy_revision,
    inputDigest: row.input_digest,
    approvalKey: row.approval_key,
    expiresAt: toIso(row.expires_at),
    decision: row.decision as DispatchState['decision'],
    resolvedBy: row.resolved_by,
    resolutionSource: row.resolution_source as DispatchState['resolutionSource'],
    resolutionReason: row.resolution_reason,
    attempt: row.attempt,
    executor: row.executor as ExecutorKind | null,
    cwd: row.cwd,
    outcome: row.outcome as DispatchState['outcome'],
    result: fromJsonb(row.result),
    error: row.error as WireError | null,
    durationMs: row.duration_ms,
    requestedAt: toIso(row.requested_at),
    decidedAt: toIso(row.decided_at),
    suspendedAt: toIso(row.suspended_at),
    resolvedAt: toIso(row.resolved_at),
    startedAt: toIso(row.started_at),
    settledAt: toIso(row.settled_at),
    updatedAt: toIso(row.updated_at),
  };
}

function dispatchValues({
  state,
  lastSeq,
  eventCount,
}: StoredDispatch): RecordsetRow<'dispatches'> {
  return {
    tenant: state.tenant,
    dispatch_id: state.dispatchId,
    run_id: state.runId,
    status: state.status,
    call_id: state.callId,
    tool_name: state.toolName,
    tool: jsonCell(state.tool ?? undefined),
    input: jsonCell(state.input),
    effective_input: jsonCell(state.effectiveInput),
    agent: jsonCell(state.agent ?? undefined),
    isolation: jsonCell(state.isolation ?? undefined),
    profile: state.profile,
    taint: state.taint,
    submitted_by: state.submittedBy,
    retry_of: state.retryOf,
    retry_depth: state.retryDepth,
    trace_id: state.traceId,
    verdict: state.verdict,
    decided_by: state.decidedBy,
    rule: jsonCell(state.rule),
    reason: state.reason,
    policy_revision: state.policyRevision,
    input_digest: state.inputDigest,
    approval_key: state.approvalKey,
    expires_at: state.expiresAt,
    decision: state.decision,
    resolved_by: state.resolvedBy,
    resolution_source: state.resolutionSource,
    resolution_reason: state.resolutionReason,
    attempt: state.attempt,
    executor: state.executor,
    cwd: state.cwd,
    outcome: state.outcome,
    result: jsonCell(state.result),
    error: jsonCell(state.error ?? undefined),
    duration_ms: state.durationMs,
    requested_at: state.requestedAt,
    decided_at: state.decidedAt,
    suspended_at: state.suspendedAt,
    resolved_at: state.resolvedAt,
    started_at: state.startedAt,
    settled_at: state.settledAt,
    updated_at: state.updatedAt,
    last_seq: lastSeq,
    event_count: eventCount,
  };
}

const DISPATCHES: TableSpec<'dispatches'> = {
  table: 'dispatches',
  columns: {
    tenant: 'text',
    dispatch_id: 'text',
    run_id: 'text',
    status: 'text',
    call_id: 'text',
    tool_name: 'text',
    tool: 'jsonb',
    input: 'jsonb',
    effective_input: 'jsonb',
    agent: 'jsonb',
    isolation: 'jsonb',
    profile: 'text',
    taint: 'text',
    submitted_by: 'text',
    retry_of: 'text',
    retry_depth: 'integer',
    trace_id: 'text',
    verdict: 'text',
    decided_by: 'text',
    rule: 'jsonb',
    reason: 'text',
    policy_revision: 'integer',
    input_digest: 'text',
    approval_key: 'text',
    expires_at: 'timestamptz',
    decision: 'text',
    resolved_by: 'text',
    resolution_source: 'text',
    resolution_reason: 'text',
    attempt: 'integer',
    executor: 'text',
    cwd: 'text',
    outcome: 'text',
    result: 'jsonb',
    error: 'jsonb',
    duration_ms: 'double precision',
    requested_at: 'timestamptz',
    decided_at: 'timestamptz',
    suspended_at: 'timestamptz',
    resolved_at: 'timestamptz',
    started_at: 'timestamptz',
    settled_at: 'timestamptz',
    updated_at: 'timestamptz',
    last_seq: 'bigint',
    event_count: 'integer',
  },
};

export const DISPATCH_ROWS: FoldedTable<'dispatches', StoredDispatch> = {
  spec: DISPATCHES,
  fromRow: (row) => ({
    state: dispatchFromRow(row),
    lastSeq: row.last_seq,
    eventCount: row.event_count,
  }),
  toRow: dispatchValues,
};

// ---------------------------------------------------------------------------------------------
// approvals

export function approvalFromRow(row: ApprovalRow): ApprovalState {
  return {
    tenant: row.tenant,
    runId: row.run_id,
    dispatchId: row.dispatch_id,
    approvalKey: row.approval_key,
    inputDigest: row.input_digest,
    policyRevision: row.policy_revision,
    status: row.status as ApprovalState['status'],
    toolName: row.tool_name,
    tool: row.tool as ToolRef | null,
    input: fromJsonb(row.input),
    agent: row.agent as AgentRef | null,
    isolation: row.isolation as Isolation | null,
    profile: row.profile,
    decidedBy: row.decided_by as DecidedBy | null,
    rule: fromJsonb(row.rule),
    submittedBy: row.submitted_by,
    onTimeout: row.on_timeout as ApprovalState['onTimeout'],
    separationOfDuties: row.separation_of_duties,
    suspendedAt: toIso(row.suspended_at),
    expiresAt: toIso(row.expires_at),
    decision: row.decision as ApprovalState['decision'],
    reason: row.reason,
    resolvedBy: row.resolved_by,
    source: row.source as ApprovalState['source'],
    resolvedAt: toIso(row.resolved_at),
    updatedAt: toIso(row.updated_at),
  };
}

function approvalValues({ state, lastSeq }: Stored<ApprovalState>): RecordsetRow<'approvals'> {
  return {
    tenant: state.tenant,
    dispatch_id: state.dispatchId,
    run_id: state.runId,
    approval_key: state.approvalKey,
    input_digest: state.inputDigest,
    policy_revision: state.policyRevision,
    status: state.status,
    tool_name: state.toolName,
    tool: jsonCell(state.tool ?? undefined),
    input: jsonCell(state.input),
    agent: jsonCell(state.agent ?? undefined),
    isolation: jsonCell(state.isolation ?? undefined),
    profile: state.profile,
    decided_by: state.decidedBy,
    rule: jsonCell(state.rule),
    submitted_by: state.submittedBy,
    on_timeout: state.onTimeout,
    separation_of_duties: state.separationOfDuties,
    suspended_at: state.suspendedAt,
    expires_at: state.expiresAt,
    decision: state.decision,
    reason: state.reason,
    resolved_by: state.resolvedBy,
    source: state.source,
    resolved_at: state.resolvedAt,
    updated_at: state.updatedAt,
    last_seq: lastSeq,
  };
}

const APPROVALS: TableSpec<'approvals'> = {
  table: 'approvals',
  columns: {
    tenant: 'text',
    dispatch_id: 'text',
    run_id: 'text',
    approval_key: 'text',
    input_digest: 'text',
    policy_revision: 'integer',
    status: 'text',
    tool_name: 'text',
    tool: 'jsonb',
    input: 'jsonb',
    agent: 'jsonb',
    isolation: 'jsonb',
    profile: 'text',
    decided_by: 'text',
    rule: 'jsonb',
    submitted_by: 'text',
    on_timeout: 'text',
    separation_of_duties: 'boolean',
    suspended_at: 'timestamptz',
    expires_at: 'timestamptz',
    decision: 'text',
    reason: 'text',
    resolved_by: 'text',
    source: 'text',
    resolved_at: 'timestamptz',
    updated_at: 'timestamptz',
    last_seq: 'bigint',
  },
};

export const APPROVAL_ROWS: FoldedTable<'approvals', Stored<ApprovalState>> = {
  spec: APPROVALS,
  fromRow: (row) => ({ state: approvalFromRow(row), lastSeq: row.last_seq }),
  toRow: approvalValues,
};

// ---------------------------------------------------------------------------------------------
// worktrees and artifacts

function worktreeFromRow(row: WorktreeRow): WorktreeState {
  return {
    tenant: row.tenant,
    worktreeId: row.worktree_id,
    runId: row.run_id,
    status: row.status as WorktreeStatus,
    agentKey: row.agent_key,
    repo: row.repo,
    baseRef: row.base_ref,
    baseCommit: row.base_commit,
    path: row.path,
    branch: row.branch,
    reason: row.reason,
    restartedFrom: row.restarted_from,
    acquiredAt: toIso(row.acquired_at),
    collectedAt: toIso(row.collected_at),
    retainedAt: toIso(row.retained_at),
    droppedAt: toIso(row.dropped_at),
    disposedAt: toIso(row.disposed_at),
    updatedAt: toIso(row.updated_at),
  };
}

function worktreeValues({ state, lastSeq }: Stored<WorktreeState>): RecordsetRow<'worktrees'> {
  return {
    tenant: state.tenant,
    worktree_id: state.worktreeId,
    run_id: state.runId,
    status: state.status,
    agent_key: state.agentKey,
    repo: state.repo,
    base_ref: state.baseRef,
    base_commit: state.baseCommit,
    path: state.path,
    branch: state.branch,
    reason: state.reason,
    restarted_from: state.restartedFrom,
    acquired_at: state.acquiredAt,
    collected_at: state.collectedAt,
    retained_at: state.retainedAt,
    dropped_at: state.droppedAt,
    disposed_at: state.disposedAt,
    updated_at: state.updatedAt,
    last_seq: lastSeq,
  };
}

const WORKTREES: TableSpec<'worktrees'> = {
  table: 'worktrees',
  columns: {
    tenant: 'text',
    worktree_id: 'text',
    run_id: 'text',
    status: 'text',
    agent_key: 'text',
    repo: 'text',
    base_ref: 'text',
    base_commit: 'text',
    path: 'text',
    branch: 'text',
    reason: 'text',
    restarted_from: 'text',
    acquired_at: 'timestamptz',
    collected_at: 'timestamptz',
    retained_at: 'timestamptz',
    dropped_at: 'timestamptz',
    disposed_at: 'timestamptz',
    updated_at: 'timestamptz',
    last_seq: 'bigint',
  },
};

export const WORKTREE_ROWS: FoldedTable<'worktrees', Stored<WorktreeState>> = {
  spec: WORKTREES,
  fromRow: (row) => ({ state: worktreeFromRow(row), lastSeq: row.last_seq }),
  toRow: worktreeValues,
};

/** A collected patch and where in the journal it was collected. */
export interface CollectedArtifact {
  tenant: string;
  runId: string;
  worktreeId: string;
  artifact: PatchArtifact;
  at: string;
  seq: number;
}

/**
 * Indexes collected patches in one statement. An artifact collected again (same ref) is kept once,
 * as first given.
 */
export async function insertArtifacts(
  db: Db,
  collected: readonly CollectedArtifact[],
): Promise<void> {
  if (!collected.length) return;
  const rows = collected.map(
    ({ tenant, runId, worktreeId, artifact, at, seq }): RecordsetRow<'artifacts'> => ({
      tenant,
      ref: artifact.ref,
      worktree_id: worktreeId,
      run_id: runId,
      kind: artifact.kind,
      base_commit: artifact.baseCommit,
      bytes: artifact.bytes,
      sha256: artifact.sha256,
      files: jsonCell(artifact.files),
      created_at: at,
      seq,
    }),
  );
  await sql`${insertFromRecordset(ARTIFACTS, rows)} on conflict (tenant, ref) do nothing`.execute(
    db,
  );
}

const ARTIFACTS: TableSpec<'artifacts'> = {
  table: 'artifacts',
  columns: {
    tenant: 'text',
    ref: 'text',
    worktree_id: 'text',
    run_id: 'text',
    kind: 'text',
    base_commit: 'text',
    bytes: 'bigint',
    sha256: 'text',
    files: 'jsonb',
    created_at: 'timestamptz',
    seq: 'bigint',
  },
};

// ---------------------------------------------------------------------------------------------
// runs

/** What a run of events adds to one run's row: the same as touching it once per event. */
export interface RunTouch {
  tenant: string;
  runId: string;
  firstAt: string;
  lastAt: string;
  eventCount: number;
  lastSeq: number;
}

/** Counts runs of events into their runs' rows in one statement (one touch per run). */
export async function touchRuns(db: Db, touches: readonly RunTouch[]): Promise<void> {
  if (!touches.length) return;
  const rows = touches.map((touch): RecordsetRow<'runs'> => ({
    tenant: touch.tenant,
    run_id: touch.runId,
    first_at: touch.firstAt,
    last_at: touch.lastAt,
    event_count: touch.eventCount,
    last_seq: touch.lastSeq,
  }));
  await sql`${insertFromRecordset(RUNS, rows)} on conflict (tenant, run_id) do update set
    first_at = least(runs.first_at, excluded.first_at),
    last_at = greatest(runs.last_at, excluded.last_at),
    event_count = runs.event_count + excluded.event_count,
    last_seq = greatest(runs.last_seq, excluded.last_seq)`.execute(db);
}

const RUNS: TableSpec<'runs'> = {
  table: 'runs',
  columns: {
    tenant: 'text',
    run_id: 'text',
    first_at: 'timestamptz',
    last_at: 'timestamptz',
    event_count: 'integer',
    last_seq: 'bigint',
  },
};
