import { sql } from 'kysely';
import { eventually } from '@toolgate/testing';
import {
  dispatchFixture,
  sequenced,
  worktreeFixture,
} from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { compareProjections } from '../rebuild/compare-projections';
import { applyEvent, applyEvents } from './apply-event';

describe('applyEvent (PostgreSQL)', () => {
  let t: JournalTestDb;
  beforeEach(async () => {
    t = await useJournalDb('apply');
  });
  afterEach(async () => {
    await t.cleanup();
  });

  const d = dispatchFixture({ dispatchId: 'd1' });

  it('applies an event once per stream sequence: the second delivery is a duplicate', async () => {
    const [entry] = sequenced([d.requested(0)]);
    expect(await applyEvent(t.db, entry!)).toBe('applied');
    expect(await applyEvent(t.db, entry!)).toBe('duplicate');

    const audit = await t.db.selectFrom('audit_log').selectAll().execute();
    expect(audit).toHaveLength(1);
    const row = await t.db.selectFrom('dispatches').selectAll().executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'requested', event_count: 1, last_seq: 1 });
    const run = await t.db.selectFrom('runs').selectAll().executeTakeFirstOrThrow();
    expect(run.event_count).toBe(1);
  });

  it('concurrent deliveries of one sequence apply it exactly once', async () => {
    const [entry] = sequenced([d.requested(0)]);
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => applyEvent(t.db, entry!)));
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(5);
    const row = await t.db.selectFrom('dispatches').select('event_count').executeTakeFirstOrThrow();
    expect(row.event_count).toBe(1);
  });

  it('concurrent events of one dispatch are all folded in (none lost to a race)', async () => {
    const entries = sequenced([
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(2),
      d.settled(3, 'ok'),
    ]);
    await Promise.all(entries.map((entry) => applyEvent(t.db, entry)));
    const row = await t.db.selectFrom('dispatches').selectAll().executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      status: 'settled',
      call_id: 'call-d1',
      verdict: 'allow',
      attempt: 1,
      outcome: 'ok',
      event_count: 4,
      last_seq: 4,
    });
  });

  it('the audit row and the projection commit together: a rolled-back apply is applied again', async () => {
    const [entry] = sequenced([d.requested(0)]);
    await expect(
      t.db.transaction().execute(async (trx) => {
        expect(await applyEvent(trx, entry!)).toBe('applied');
        throw new Error('crash before commit');
      }),
    ).rejects.toThrow('crash before commit');
    expect(await t.db.selectFrom('audit_log').selectAll().execute()).toHaveLength(0);
    expect(await t.db.selectFrom('dispatches').selectAll().execute()).toHaveLength(0);
    expect(await applyEvent(t.db, entry!)).toBe('applied');
  });

  it('stores the event and the fold: JSON columns round-trip and timestamps are instants', async () => {
    const input = { path: '/etc/hosts', lines: [1, 2, 3], nested: { flag: true } };
    const e = dispatchFixture({ dispatchId: 'd2', input });
    for (const entry of sequenced([e.requested(0), e.decided(1, 'ask'), e.suspended(1, 60)])) {
      await applyEvent(t.db, entry);
    }
    const row = await t.db.selectFrom('dispatches').selectAll().executeTakeFirstOrThrow();
    expect(row.input).toEqual(input);
    expect(row.effective_input).toEqual(input);
    expect(row.rule).toEqual({ tool: 'read_file' });
    expect(row.expires_at?.toISOString()).toBe('2026-01-01T00:01:00.000Z');
    const approval = await t.db.selectFrom('approvals').selectAll().executeTakeFirstOrThrow();
    expect(approval).toMatchObject({
      status: 'pending',
      approval_key: e.approvalKey,
      input,
      tool_name: 'read_file',
    });
    const audit = await t.db
      .selectFrom('audit_log')
      .select(['seq', 'type', 'event'])
      .orderBy('seq')
      .execute();
    expect(audit.map((a) => a.type)).toEqual(['requested', 'decided', 'suspended']);
    expect(audit[0]!.event).toMatchObject({ type: 'requested', input });
  });

  it('keeps a JSON null result apart from an absent one, and text exactly as sent', async () => {
    const input = {
      text: 'quote " backslash \\ newline \n unicode \u00e9\u{1F600} nul-free',
      n: 1.5e-7,
    };
    const withNull = dispatchFixture({ dispatchId: 'null-result', input });
    const pending = dispatchFixture({ dispatchId: 'no-result' });
    for (const entry of sequenced([
      withNull.requested(0),
      withNull.decided(1, 'allow'),
      withNull.settled(2, 'ok', { result: null }),
      pending.requested(3),
    ])) {
      await applyEvent(t.db, entry);
    }
    const rows = await t.db
      .selectFrom('dispatches')
      .select(['dispatch_id', 'input', 'result', sql<boolean>`result is null`.as('sql_null')])
      .orderBy('dispatch_id')
      .execute();
    expect(rows).toEqual([
      {
        dispatch_id: 'no-result',
        input: { path: '/tmp/no-result.txt' },
        result: null,
        sql_null: true,
      },
      { dispatch_id: 'null-result', input, result: null, sql_null: false },
    ]);
  });

  it('folds worktree events into worktrees and artifacts', async () => {
    const w = worktreeFixture({ worktreeId: 'wt1' });
    const entries = sequenced([w.acquired(0), w.collected(5), w.collected(5), w.disposed(6)]);
    for (const entry of entries) await applyEvent(t.db, entry);
    const tree = await t.db.selectFrom('worktrees').selectAll().executeTakeFirstOrThrow();
    expect(tree).toMatchObject({
      worktree_id: 'wt1',
      status: 'disposed',
      repo: '/srv/repo',
      last_seq: 4,
    });
    const artifacts = await t.db.selectFrom('artifacts').selectAll().execute();
    expect(artifacts).toHaveLength(1);
    expect(artifacts[0]).toMatchObject({ ref: 'patch-wt1', kind: 'patch', bytes: 120, seq: 2 });
    expect(artifacts[0]!.files).toEqual([{ path: 'src/a.ts', status: 'modified', binary: false }]);
  });

  it('applyEvents folds a run like applyEvent one at a time, and skips sequences already applied', async () => {
    const a = dispatchFixture({ dispatchId: 'da' });
    const b = dispatchFixture({ dispatchId: 'db', runId: 'run-2' });
    const w = worktreeFixture({ worktreeId: 'wt1' });
    const entries = sequenced([
      a.requested(0),
      b.requested(0),
      a.decided(1, 'ask'),
      w.acquired(1),
      b.decided(1, 'allow'),
      a.suspended(2, 60),
      b.started(2),
      w.collected(3),
      a.resolved(4, 'allow'),
      b.settled(3, 'ok'),
      a.started(5),
      a.settled(6, 'ok'),
    ]);
    const snapshot = async (db: JournalTestDb['db']) => ({
      dispatches: await db.selectFrom('dispatches').selectAll().orderBy('dispatch_id').execute(),
      approvals: await db.selectFrom('approvals').selectAll().orderBy('dispatch_id').execute(),
      worktrees: await db.selectFrom('worktrees').selectAll().execute(),
      artifacts: await db.selectFrom('artifacts').selectAll().execute(),
      runs: await db.selectFrom('runs').selectAll().orderBy('run_id').execute(),
      audit: await db.selectFrom('audit_log').selectAll().orderBy('seq').execute(),
    });

    for (const entry of entries) await applyEvent(t.db, entry);
    const oneByOne = await snapshot(t.db);

    const other = await useJournalDb('apply_batch');
    try {
      // The first three already applied on their own: the run applies the rest, once.
      for (const entry of entries.slice(0, 3)) await applyEvent(other.db, entry);
      await other.db.transaction().execute((trx) => applyEvents(trx, [...entries, entries[5]!]));
      await other.db.transaction().execute((trx) => applyEvents(trx, entries));
      expect(await snapshot(other.db)).toEqual(oneByOne);
      expect(oneByOne.runs.map((r) => r.event_count)).toEqual([8, 4]);
    } finally {
      await other.cleanup();
    }
  });

  it('applyEvents folds a stored worktree and a patch collected twice in one run like one at a time', async () => {
    const w = worktreeFixture({ worktreeId: 'wt1' });
    const entries = sequenced([
      w.acquired(0),
      w.collected(5),
      w.retained(6),
      w.collected(5),
      w.dropped(7),
    ]);
    for (const entry of entries) await applyEvent(t.db, entry);

    const other = await useJournalDb('apply_wt_batch');
    try {
      await applyEvent(other.db, entries[0]!);
      await other.db.transaction().execute((trx) => applyEvents(trx, entries.slice(1)));
      expect(await compareProjections(t.db, other.db)).toEqual([]);
      expect(await other.db.selectFrom('worktrees').selectAll().execute()).toMatchObject([
        { status: 'dropped', reason: 'pin-cap', repo: '/srv/repo', last_seq: 5 },
      ]);
      expect(await other.db.selectFrom('artifacts').selectAll().execute()).toMatchObject([
        { ref: 'patch-wt1', seq: 2 },
      ]);
    } finally {
      await other.cleanup();
    }
  });

  it('folds lanes side by side: two batches meeting shared runs in opposite orders do not deadlock', async () => {
    // Lanes fold different dispatches at once, but their runs' rows are shared. Batch X meets
    // run-a then run-b, batch Y run-b then run-a. With run-a held elsewhere, X waits for it; Y
    // must then wait for run-a too, not take run-b first (X would wait for run-b, Y for run-a).
    const fixture = (name: string, runId: string) => dispatchFixture({ dispatchId: name, runId });
    const setup = sequenced([
      fixture('s-a', 'run-a').requested(0),
      fixture('s-b', 'run-b').requested(0),
    ]);
    const lane = (name: string, order: string[]) =>
      order.flatMap((runId) => {
        const f = fixture(`${name}-${runId}`, runId);
        return [f.requested(0), f.decided(1, 'allow')];
      });
    const all = sequenced([
      ...setup.map((e) => e.event),
      ...lane('x', ['run-a', 'run-b']),
      ...lane('y', ['run-b', 'run-a']),
    ]);
    const x = all.filter((e) => e.event.dispatchId.startsWith('x-'));
    const y = all.filter((e) => e.event.dispatchId.startsWith('y-'));
    await t.db.transaction().execute((trx) => applyEvents(trx, all.slice(0, 2)));

    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const holder = t.db.transaction().execute(async (trx) => {
      await sql`select 1 from runs where run_id = 'run-a' for update`.execute(trx);
      await released;
    });
    const waitingOnLocks = async () =>
      Number(
        (
          await sql<{ n: string }>`select count(*) as n from pg_stat_activity
            where wait_event_type = 'Lock' and query like '%insert into runs%'`.execute(t.db)
        ).rows[0]!.n,
      );
    const folds = [x, y].map((batch) =>
      t.db.transaction().execute((trx) => applyEvents(trx, batch)),
    );
    try {
      await eventually(async () => ((await waitingOnLocks()) >= 2 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'both batches waiting on run rows',
      });
    } finally {
      release();
    }
    await holder;
    await Promise.all(folds);

    const other = await useJournalDb('apply_lanes');
    try {
      for (const entry of all) await applyEvent(other.db, entry);
      expect(await compareProjections(other.db, t.db)).toEqual([]);
    } finally {
      await other.cleanup();
    }
  });

  it('lands in the test schema, not the default one', async () => {
    const { rows } = await sql<{ table_schema: string }>`
      select distinct table_schema from information_schema.tables where table_name = 'dispatches' and table_schema = ${t.schema}`.execute(
      t.db,
    );
    expect(rows).toEqual([{ table_schema: t.schema }]);
    // The rows go there too: the session's schema is the test's, not `public`.
    await applyEvent(t.db, sequenced([d.requested(0)])[0]!);
    const written = await sql<{ schema: string; n: number }>`
      select current_schema() as schema, (select count(*) from ${sql.table(`${t.schema}.audit_log`)})::int as n`.execute(
      t.db,
    );
    expect(written.rows).toEqual([{ schema: t.schema, n: 1 }]);
  });
});
