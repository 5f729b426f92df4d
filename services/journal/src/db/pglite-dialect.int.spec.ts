import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import {
  at,
  dispatchFixture,
  sequenced,
  worktreeFixture,
} from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvent } from '../projection/apply-event';
import { dueApprovals, getApproval, listApprovals } from '../queries/approval-queries';
import { getDispatch } from '../queries/dispatch-queries';
import { getRun } from '../queries/run-queries';
import { compareProjections } from '../rebuild/compare-projections';
import { resetProjection } from '../rebuild/rebuild-projection';
import { createDb, type JournalDb } from './create-db';
import { MIGRATION_TABLE } from './migrate-to-latest';
import { JOURNAL_MIGRATIONS } from './migration-provider';

const d1 = dispatchFixture({ dispatchId: 'd1' });
const d2 = dispatchFixture({ dispatchId: 'd2', toolName: 'shell', input: { cmd: 'make deploy' } });
const other = dispatchFixture({ tenant: 'globex', dispatchId: 'd1' });
const w = worktreeFixture({ worktreeId: 'wt1' });
const journal = sequenced([
  d1.requested(0),
  d2.requested(1),
  d1.decided(2, 'allow'),
  d2.decided(3, 'ask'),
  d2.suspended(3, 60),
  d1.started(4),
  other.requested(5),
  d1.settled(6, 'ok', { result: [1, 'two', { three: 3 }] }),
  w.acquired(7),
  w.collected(8),
  other.decided(9, 'deny', 'nope'),
  other.settled(9, 'denied'),
]);

describe('embedded PGlite database', () => {
  // A fresh PGlite data directory costs an initdb (seconds), so the file shares one database and
  // empties the projection before each test.
  let dir: string;
  let path: string;
  let lite: JournalDb;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'toolgate-journal-'));
    path = join(dir, 'data');
    lite = await createDb({ pglitePath: path, schema: 'journal' });
  }, 120_000);
  beforeEach(async () => {
    await resetProjection(lite.db);
  });
  afterAll(async () => {
    await lite?.db.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  it('runs the migrations into the schema and answers the same queries', async () => {
    expect(lite.kind).toBe('pglite');
    for (const entry of journal) expect(await applyEvent(lite.db, entry)).toBe('applied');
    expect(await applyEvent(lite.db, journal[0]!)).toBe('duplicate');

    const { rows } = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = 'journal' order by table_name`.execute(
      lite.db,
    );
    expect(rows.map((r) => r.table_name)).toEqual([
      'approvals',
      'artifacts',
      'audit_log',
      'dispatches',
      MIGRATION_TABLE,
      `${MIGRATION_TABLE}_lock`,
      'runs',
      'worktrees',
    ]);

    const found = await getDispatch(lite.db, 'acme', 'd1');
    expect(found?.dispatch).toMatchObject({
      status: 'settled',
      result: [1, 'two', { three: 3 }],
      lastSeq: 8,
    });
    expect(found?.events.map((e) => e.seq)).toEqual([1, 3, 6, 8]);
    expect(await getDispatch(lite.db, 'globex', 'd2')).toBeUndefined();

    const run = await getRun(lite.db, 'acme', 'run-1');
    expect(run?.status).toBe('suspended');
    expect(run?.pending).toEqual([
      {
        key: d2.approvalKey,
        dispatchId: 'd2',
        tool: 'shell',
        inputPreview: {
          json: '{"cmd": "make deploy"}',
          truncated: false,
          bytes: 22,
          summary: null,
        },
        rule: { tool: 'shell' },
        since: at(3),
        expires: at(60),
      },
    ]);
    expect((await getRun(lite.db, 'globex', 'run-1'))?.status).toBe('settled');

    const now = new Date(Date.parse(at(30)));
    expect(
      (await listApprovals(lite.db, { tenant: 'acme', minAgeMs: 20_000 }, now)).approvals.map(
        (a) => a.dispatchId,
      ),
    ).toEqual(['d2']);
    expect(await listApprovals(lite.db, { tenant: 'acme', minAgeMs: 40_000 }, now)).toEqual({
      approvals: [],
      nextCursor: null,
    });
    expect(await getApproval(lite.db, 'acme', d2.approvalKey)).toMatchObject({ dispatchId: 'd2' });
    expect(await getApproval(lite.db, 'globex', d2.approvalKey)).toBeUndefined();
    expect(await dueApprovals(lite.db, new Date(Date.parse(at(59))), 10)).toEqual([]);
    expect(
      (await dueApprovals(lite.db, new Date(Date.parse(at(60))), 10)).map((a) => a.dispatchId),
    ).toEqual(['d2']);
  });

  it('serialises concurrent transactions on its single session', async () => {
    const [entry] = journal;
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => applyEvent(lite!.db, entry!)),
    );
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    // Different events of one dispatch at once: each transaction sees the previous one's row.
    await Promise.all(journal.slice(1, 8).map((e) => applyEvent(lite!.db, e)));
    const row = await lite.db
      .selectFrom('dispatches')
      .selectAll()
      .where('tenant', '=', 'acme')
      .where('dispatch_id', '=', 'd1')
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'settled', event_count: 4 });
  });

  it('rolls back a failed transaction and keeps the session usable', async () => {
    await expect(
      lite.db.transaction().execute(async (trx) => {
        await applyEvent(trx, journal[0]!);
        await sql`select * from no_such_table`.execute(trx);
      }),
    ).rejects.toThrow(/no_such_table/);
    expect(await lite.db.selectFrom('audit_log').selectAll().execute()).toEqual([]);
    expect(await applyEvent(lite.db, journal[0]!)).toBe('applied');
  });

  describe('against PostgreSQL', () => {
    let pgDb: JournalTestDb;
    beforeEach(async () => {
      pgDb = await useJournalDb('pglite_cmp');
    });
    afterEach(async () => {
      await pgDb.cleanup();
    });

    it('folds the same journal into the same rows as PostgreSQL', async () => {
      for (const entry of journal) {
        await applyEvent(lite.db, entry);
        await applyEvent(pgDb.db, entry);
      }
      expect(await compareProjections(lite.db, pgDb.db)).toEqual([]);
      // And the comparison does see a difference when there is one.
      await applyEvent(pgDb.db, {
        event: d2.resolved(20, 'deny'),
        seq: journal.length + 1,
        stream: 'fixture_journal',
      });
      const differences = await compareProjections(lite.db, pgDb.db);
      expect(differences.map((d) => [d.table, d.kind])).toEqual([
        ['audit_log', 'missing-in-a'],
        ['dispatches', 'changed'],
        ['approvals', 'changed'],
        ['runs', 'changed'],
      ]);
    });
  });

  // Last: it closes and reopens the shared database.
  it('keeps its data on disk across reopen, and migrating again is a no-op', async () => {
    for (const entry of journal.slice(0, 3)) await applyEvent(lite.db, entry);
    await lite.db.destroy();
    lite = await createDb({ pglitePath: path, schema: 'journal' });
    const migrations = await lite.db
      .withSchema('journal')
      .selectFrom(MIGRATION_TABLE as never)
      .selectAll()
      .execute();
    // Each migration applied exactly once, none again on reopen.
    expect(migrations.map((m) => (m as { name: string }).name).sort()).toEqual(
      Object.keys(JOURNAL_MIGRATIONS).sort(),
    );
    expect(await applyEvent(lite.db, journal[0]!)).toBe('duplicate');
    expect((await getDispatch(lite.db, 'acme', 'd1'))?.dispatch.status).toBe('decided');
  });
});
