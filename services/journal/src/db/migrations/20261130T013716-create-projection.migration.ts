import { sql, type Kysely } from 'kysely';

/**
 * The journal projection's first schema. Frozen: a migration never imports application code and
 * is never edited once released; a change is a new, later migration.
 *
 * `db` already carries the target schema (`withSchema`), so every table lands in it.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a frozen migration must not depend on today's Database type
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('audit_log')
    .addColumn('stream', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('dispatch_id', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('event', 'jsonb', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_log_pk', ['stream', 'seq'])
    .execute();
  await db.schema
    .createIndex('audit_log_dispatch_idx')
    .on('audit_log')
    .columns(['tenant', 'dispatch_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('audit_log_run_idx')
    .on('audit_log')
    .columns(['tenant', 'run_id', 'seq'])
    .execute();

  await db.schema
    .createTable('dispatches')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('dispatch_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('call_id', 'text')
    .addColumn('tool_name', 'text')
    .addColumn('tool', 'jsonb')
    .addColumn('input', 'jsonb')
    .addColumn('effective_input', 'jsonb')
    .addColumn('agent', 'jsonb')
    .addColumn('isolation', 'jsonb')
    .addColumn('profile', 'text')
    .addColumn('taint', 'text')
    .addColumn('submitted_by', 'text')
    .addColumn('retry_of', 'text')
    .addColumn('retry_depth', 'integer')
    .addColumn('verdict', 'text')
    .addColumn('decided_by', 'text')
    .addColumn('rule', 'jsonb')
    .addColumn('reason', 'text')
    .addColumn('policy_revision', 'integer')
    .addColumn('input_digest', 'text')
    .addColumn('approval_key', 'text')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('decision', 'text')
    .addColumn('resolved_by', 'text')
    .addColumn('resolution_source', 'text')
    .addColumn('resolution_reason', 'text')
    .addColumn('attempt', 'integer')
    .addColumn('executor', 'text')
    .addColumn('cwd', 'text')
    .addColumn('outcome', 'text')
    .addColumn('result', 'jsonb')
    .addColumn('error', 'jsonb')
    .addColumn('duration_ms', 'double precision')
    .addColumn('requested_at', 'timestamptz')
    .addColumn('decided_at', 'timestamptz')
    .addColumn('suspended_at', 'timestamptz')
    .addColumn('resolved_at', 'timestamptz')
    .addColumn('started_at', 'timestamptz')
    .addColumn('settled_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('dispatches_pk', ['tenant', 'dispatch_id'])
    .execute();
  await db.schema
    .createIndex('dispatches_run_idx')
    .on('dispatches')
    .columns(['tenant', 'run_id'])
    .execute();

  await db.schema
    .createTable('approvals')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('dispatch_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('approval_key', 'text', (c) => c.notNull())
    .addColumn('input_digest', 'text', (c) => c.notNull())
    .addColumn('policy_revision', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('tool_name', 'text')
    .addColumn('tool', 'jsonb')
    .addColumn('input', 'jsonb')
    .addColumn('agent', 'jsonb')
    .addColumn('isolation', 'jsonb')
    .addColumn('profile', 'text')
    .addColumn('decided_by', 'text')
    .addColumn('rule', 'jsonb')
    .addColumn('submitted_by', 'text')
    .addColumn('on_timeout', 'text')
    .addColumn('separation_of_duties', 'boolean')
    .addColumn('suspended_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('decision', 'text')
    .addColumn('reason', 'text')
    .addColumn('resolved_by', 'text')
    .addColumn('source', 'text')
    .addColumn('resolved_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('approvals_pk', ['tenant', 'dispatch_id'])
    .execute();
  await db.schema
    .createIndex('approvals_key_idx')
    .on('approvals')
    .columns(['tenant', 'approval_key'])
    .execute();
  await db.schema
    .createIndex('approvals_status_idx')
    .on('approvals')
    .columns(['tenant', 'status', 'suspended_at'])
    .execute();
  // The timeout sweeper scans pending approvals across tenants by expiry.
  await db.schema
    .createIndex('approvals_due_idx')
    .on('approvals')
    .column('expires_at')
    .where(sql.ref('status'), '=', 'pending')
    .execute();

  await db.schema
    .createTable('runs')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('first_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_at', 'timestamptz', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('runs_pk', ['tenant', 'run_id'])
    .execute();

  await db.schema
    .createTable('worktrees')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('worktree_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('agent_key', 'text')
    .addColumn('repo', 'text')
    .addColumn('base_ref', 'text')
    .addColumn('base_commit', 'text')
    .addColumn('path', 'text')
    .addColumn('branch', 'text')
    .addColumn('reason', 'text')
    .addColumn('restarted_from', 'text')
    .addColumn('acquired_at', 'timestamptz')
    .addColumn('collected_at', 'timestamptz')
    .addColumn('retained_at', 'timestamptz')
    .addColumn('dropped_at', 'timestamptz')
    .addColumn('disposed_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('worktrees_pk', ['tenant', 'worktree_id'])
    .execute();
  await db.schema
    .createIndex('worktrees_run_idx')
    .on('worktrees')
    .columns(['tenant', 'run_id'])
    .execute();

  await db.schema
    .createTable('artifacts')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('worktree_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('base_commit', 'text', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('files', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('artifacts_pk', ['tenant', 'ref'])
    .execute();
  await db.schema
    .createIndex('artifacts_worktree_idx')
    .on('artifacts')
    .columns(['tenant', 'worktree_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['artifacts', 'worktrees', 'runs', 'approvals', 'dispatches', 'audit_log']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
