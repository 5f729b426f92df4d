import type { JournalEvent } from '@toolgate/contracts';
import { at, dispatchFixture, sequenced, T0 } from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvent, applyEvents } from '../projection/apply-event';
import {
  dueApprovals,
  getApproval,
  getApprovalForDispatch,
  listApprovals,
  pendingApprovalCounts,
} from './approval-queries';
import { getDispatch } from './dispatch-queries';
import { getRun } from './run-queries';

/** A run the fixture journal has: getRun's answer, which must be there. */
async function knownRun(...args: Parameters<typeof getRun>) {
  const run = await getRun(...args);
  if (!run) throw new Error(`run ${args[2]} is not in the projection`);
  return run;
}

/**
 * One journal, two tenants. acme/run-1: d1 allowed and settled, d2 parked on read_file (asked at
 * t=10, expires t=100), d3 parked on shell (asked at t=50, expires t=1000). acme/run-2: d4 settled
 * denied. acme/run-3: d5 parked, d6 started. acme/run-4: d7 asked, resolved (allow), not yet run.
 * acme/run-5: d8, the same call as d2 (so the same approval key), asked, allowed, ran and failed.
 * globex reuses run-1 and the dispatch id d1, parked.
 */
const acme1 = dispatchFixture({ dispatchId: 'd1' });
const acme2 = dispatchFixture({ dispatchId: 'd2' });
const acme3 = dispatchFixture({
  dispatchId: 'd3',
  toolName: 'shell',
  input: { cmd: 'rm -rf build' },
});
const acme4 = dispatchFixture({ dispatchId: 'd4', runId: 'run-2', toolName: 'write_file' });
const acme5 = dispatchFixture({ dispatchId: 'd5', runId: 'run-3' });
const acme6 = dispatchFixture({ dispatchId: 'd6', runId: 'run-3' });
const acme7 = dispatchFixture({ dispatchId: 'd7', runId: 'run-4', toolName: 'http_fetch' });
const acme8 = dispatchFixture({ dispatchId: 'd8', runId: 'run-5', input: acme2.input });
const D8_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const globex1 = dispatchFixture({
  tenant: 'globex',
  dispatchId: 'd1',
  input: { path: '/globex/secret' },
});

const journal: JournalEvent[] = [
  acme1.requested(0),
  acme2.requested(1),
  acme1.decided(2, 'allow'),
  acme2.decided(10, 'ask'),
  acme2.suspended(10, 100),
  acme1.started(11),
  globex1.requested(12),
  acme1.settled(13, 'ok', { result: { text: 'hello' } }),
  acme3.requested(40),
  acme3.decided(50, 'ask'),
  acme3.suspended(50, 1000),
  globex1.decided(60, 'ask'),
  globex1.suspended(60, 90),
  acme4.requested(70),
  acme4.decided(71, 'deny', 'no writes'),
  acme4.settled(71, 'denied'),
  acme5.requested(80),
  acme5.decided(80, 'ask'),
  acme5.suspended(80, 5000),
  acme6.requested(81),
  acme6.decided(81, 'allow'),
  acme6.started(82),
  acme7.requested(85),
  acme7.decided(85, 'ask'),
  acme7.suspended(85, 200),
  acme7.resolved(90, 'allow'),
  // Submitted in a caller's trace: the dispatch, its run row and its approval carry it.
  { ...acme8.requested(91), traceId: D8_TRACE },
  acme8.decided(91, 'ask'),
  acme8.suspended(91, 5000),
  acme8.resolved(92, 'allow', 'carol'),
  acme8.started(92),
  acme8.settled(93, 'error'),
];

describe('read-side queries (PostgreSQL)', () => {
  let t: JournalTestDb;
  beforeAll(async () => {
    t = await useJournalDb('queries');
    for (const entry of sequenced(journal)) await applyEvent(t.db, entry);
  });
  afterAll(async () => {
    await t.cleanup();
  });

  describe('getDispatch', () => {
    it('returns the folded row and its whole history in stream order', async () => {
      const found = await getDispatch(t.db, 'acme', 'd1');
      expect(found?.dispatch).toMatchObject({
        tenant: 'acme',
        dispatchId: 'd1',
        status: 'settled',
        outcome: 'ok',
        result: { text: 'hello' },
        eventCount: 4,
        lastSeq: 8,
      });
      expect(found?.events.map((e) => [e.seq, e.event.type])).toEqual([
        [1, 'requested'],
        [3, 'decided'],
        [6, 'started'],
        [8, 'settled'],
      ]);
      expect(found?.events[0]?.event).toEqual(acme1.requested(0));
    });

    it("never shows another tenant's dispatch of the same id", async () => {
      const globex = await getDispatch(t.db, 'globex', 'd1');
      expect(globex?.dispatch).toMatchObject({
        tenant: 'globex',
        status: 'suspended',
        input: { path: '/globex/secret' },
      });
      expect(globex?.events.every((e) => e.event.tenant === 'globex')).toBe(true);
      expect(globex?.events).toHaveLength(3);
      expect(await getDispatch(t.db, 'globex', 'd2')).toBeUndefined();
      expect(await getDispatch(t.db, 'initech', 'd1')).toBeUndefined();
    });
  });

  describe('getRun', () => {
    it('a run whose in-flight dispatches are all parked is suspended and lists every open approval', async () => {
      const run = await knownRun(t.db, 'acme', 'run-1');
      expect(run.status).toBe('suspended');
      expect(run.dispatches.map((d) => [d.dispatchId, d.status])).toEqual([
        ['d1', 'settled'],
        ['d2', 'suspended'],
        ['d3', 'suspended'],
      ]);
      expect(run.pending).toEqual([
        {
          key: acme2.approvalKey,
          dispatchId: 'd2',
          tool: 'read_file',
          inputPreview: {
            json: '{"path": "/tmp/d2.txt"}',
            truncated: false,
            bytes: 23,
            summary: '/tmp/d2.txt',
          },
          rule: { tool: 'read_file' },
          since: at(10),
          expires: at(100),
        },
        {
          key: acme3.approvalKey,
          dispatchId: 'd3',
          tool: 'shell',
          inputPreview: {
            json: '{"cmd": "rm -rf build"}',
            truncated: false,
            bytes: 23,
            summary: null,
          },
          rule: { tool: 'shell' },
          since: at(50),
          expires: at(1000),
        },
      ]);
    });

    it('settled when every dispatch settled; running while any in-flight one is not parked', async () => {
      expect((await knownRun(t.db, 'acme', 'run-2')).status).toBe('settled');
      const running = await knownRun(t.db, 'acme', 'run-3');
      expect(running.status).toBe('running');
      expect(running.pending.map((p) => p.dispatchId)).toEqual(['d5']);
    });

    it("lists each dispatch's verdict, what decided it, its resolution and its outcome", async () => {
      const run = await knownRun(t.db, 'acme', 'run-5');
      expect(run.dispatches).toEqual([
        {
          dispatchId: 'd8',
          callId: expect.any(String),
          toolName: 'read_file',
          status: 'settled',
          verdict: 'ask',
          decidedBy: expect.any(String),
          decision: 'allow',
          resolvedBy: 'carol',
          outcome: 'error',
          errorCode: 'tool-failed',
          approvalKey: acme2.approvalKey,
          requestedAt: at(91),
          settledAt: at(93),
          traceId: D8_TRACE,
        },
      ]);
      const denied = await knownRun(t.db, 'acme', 'run-2');
      expect(denied.dispatches).toMatchObject([
        { verdict: 'deny', decision: null, outcome: 'denied', errorCode: null },
      ]);
    });

    it('nothing for a run the tenant does not have', async () => {
      expect(await getRun(t.db, 'acme', 'run-404')).toBeUndefined();
      expect(await getRun(t.db, 'initech', 'run-1')).toBeUndefined();
    });

    it("sees only the tenant's own dispatches in a run id another tenant also uses", async () => {
      const globex = await knownRun(t.db, 'globex', 'run-1');
      expect(globex.dispatches.map((d) => d.dispatchId)).toEqual(['d1']);
      expect(globex.pending.map((p) => p.key)).toEqual([globex1.approvalKey]);
      expect(globex.status).toBe('suspended');
    });
  });

  describe('listApprovals', () => {
    const now = new Date(T0 + 100_000);
    const ids = (list: { tenant: string; dispatchId: string }[]) =>
      list.map((a) => `${a.tenant}/${a.dispatchId}`);
    /** One page's approvals (every fixture list fits in one). */
    const listed = async (...args: Parameters<typeof listApprovals>) => {
      const page = await listApprovals(...args);
      expect(page.nextCursor).toBeNull();
      return page.approvals;
    };

    it("lists the tenant's pending approvals, oldest first, and no one else's", async () => {
      expect(ids(await listed(t.db, { tenant: 'acme' }, now))).toEqual([
        'acme/d2',
        'acme/d3',
        'acme/d5',
      ]);
      expect(ids(await listed(t.db, { tenant: 'globex' }, now))).toEqual(['globex/d1']);
      expect(await listed(t.db, { tenant: 'initech' }, now)).toEqual([]);
    });

    it('filters by run, tool and age', async () => {
      expect(ids(await listed(t.db, { tenant: 'acme', runId: 'run-3' }, now))).toEqual(['acme/d5']);
      expect(ids(await listed(t.db, { tenant: 'acme', tool: 'shell' }, now))).toEqual(['acme/d3']);
      expect(ids(await listed(t.db, { tenant: 'acme', tool: 'http_fetch' }, now))).toEqual([]);
      // now = t+100 s: d2 was asked 90 s ago, d3 50 s ago, d5 20 s ago.
      const olderThan30s = await listed(t.db, { tenant: 'acme', minAgeMs: 30_000 }, now);
      expect(ids(olderThan30s)).toEqual(['acme/d2', 'acme/d3']);
      const olderThan60s = await listed(
        t.db,
        { tenant: 'acme', minAgeMs: 60_000, runId: 'run-1' },
        now,
      );
      expect(ids(olderThan60s)).toEqual(['acme/d2']);
    });

    it('filters by status: a resolved approval is no longer pending', async () => {
      expect(ids(await listed(t.db, { tenant: 'acme', status: 'resolved' }, now))).toEqual([
        'acme/d7',
        'acme/d8',
      ]);
      expect(ids(await listed(t.db, { tenant: 'acme', status: 'all' }, now))).toEqual([
        'acme/d2',
        'acme/d3',
        'acme/d5',
        'acme/d7',
        'acme/d8',
      ]);
      expect(await listed(t.db, { tenant: 'globex', status: 'resolved' }, now)).toEqual([]);
      // The pending-approvals gauges count the same rows per tenant, with the earliest expiry.
      expect(
        (await pendingApprovalCounts(t.db)).sort((a, b) => a.tenant.localeCompare(b.tenant)),
      ).toEqual([
        { tenant: 'acme', count: 3, nextExpiry: new Date(at(100)) },
        { tenant: 'globex', count: 1, nextExpiry: new Date(at(90)) },
      ]);
      const run = await knownRun(t.db, 'acme', 'run-4');
      expect(run).toMatchObject({ status: 'running', pending: [] });
      expect(run.dispatches).toMatchObject([{ dispatchId: 'd7', status: 'resolved' }]);
      expect(await getApproval(t.db, 'acme', acme7.approvalKey)).toMatchObject({
        status: 'resolved',
        decision: 'allow',
        resolvedBy: 'bob',
        source: 'human',
        resolvedAt: at(90),
      });
    });

    it('filters by key: identical calls in two runs share one', async () => {
      const byKey = { tenant: 'acme', key: acme2.approvalKey };
      expect(acme8.approvalKey).toBe(acme2.approvalKey);
      expect(ids(await listed(t.db, byKey, now))).toEqual(['acme/d2']);
      expect(ids(await listed(t.db, { ...byKey, status: 'all' }, now))).toEqual([
        'acme/d2',
        'acme/d8',
      ]);
      expect(await listed(t.db, { ...byKey, tenant: 'globex' }, now)).toEqual([]);
    });

    it('lists a history newest first, each approval with how its call ended', async () => {
      const history = await listed(t.db, { tenant: 'acme', status: 'all', order: 'newest' }, now);
      // d8 resolved at 92, d7 at 90; then the pending ones by suspension, newest first.
      expect(ids(history)).toEqual(['acme/d8', 'acme/d7', 'acme/d5', 'acme/d3', 'acme/d2']);
      // Each with its dispatch's trace (d8's caller sent one; the others none).
      expect(history.map((a) => a.traceId)).toEqual([D8_TRACE, null, null, null, null]);
      expect(history[0]).toMatchObject({
        decision: 'allow',
        resolvedBy: 'carol',
        settled: { outcome: 'error', errorCode: 'tool-failed', at: at(93) },
      });
      // Allowed but not run yet, and still pending: no outcome.
      expect(history[1]).toMatchObject({ decision: 'allow', settled: null });
      expect(history[2]).toMatchObject({ status: 'pending', settled: null });
    });
    it('pages with a cursor in either order: every approval once, none skipped, and a cursor of another order is refused', async () => {
      for (const order of ['oldest', 'newest'] as const) {
        const whole = await listed(t.db, { tenant: 'acme', status: 'all', order }, now);
        const paged: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await listApprovals(
            t.db,
            { tenant: 'acme', status: 'all', order, limit: 2, ...(cursor ? { cursor } : {}) },
            now,
          );
          expect(page.approvals.length).toBeLessThanOrEqual(2);
          paged.push(...ids(page.approvals));
          cursor = page.nextCursor ?? undefined;
        } while (cursor);
        expect(paged).toEqual(ids(whole));
      }
      const first = await listApprovals(t.db, { tenant: 'acme', status: 'all', limit: 1 }, now);
      await expect(
        listApprovals(
          t.db,
          { tenant: 'acme', status: 'all', order: 'newest', cursor: first.nextCursor! },
          now,
        ),
      ).rejects.toMatchObject({ code: 'invalid-request' });
    });

    it('filters a history by approver, decision, outcome and time', async () => {
      const resolved = { tenant: 'acme', status: 'resolved' as const };
      expect(ids(await listed(t.db, { ...resolved, resolvedBy: 'carol' }, now))).toEqual([
        'acme/d8',
      ]);
      expect(ids(await listed(t.db, { ...resolved, decision: 'deny' }, now))).toEqual([]);
      expect(ids(await listed(t.db, { ...resolved, outcome: 'error' }, now))).toEqual(['acme/d8']);
      expect(ids(await listed(t.db, { ...resolved, since: at(91) }, now))).toEqual(['acme/d8']);
      expect(ids(await listed(t.db, { ...resolved, until: at(91) }, now))).toEqual(['acme/d7']);
    });
  });

  describe('getApproval', () => {
    it('finds an approval by key within the tenant only', async () => {
      expect(await getApproval(t.db, 'acme', acme3.approvalKey)).toMatchObject({
        tenant: 'acme',
        dispatchId: 'd3',
        status: 'pending',
        toolName: 'shell',
        input: { cmd: 'rm -rf build' },
        expiresAt: at(1000),
        onTimeout: 'deny',
        submittedBy: 'alice',
      });
      expect(await getApproval(t.db, 'globex', acme3.approvalKey)).toBeUndefined();
      expect(await getApproval(t.db, 'acme', globex1.approvalKey)).toBeUndefined();
      expect(await getApprovalForDispatch(t.db, 'acme', 'd2')).toMatchObject({
        approvalKey: acme2.approvalKey,
      });
      expect(await getApprovalForDispatch(t.db, 'globex', 'd2')).toBeUndefined();
    });
  });

  describe('dueApprovals', () => {
    it('returns pending approvals whose expiry has passed, soonest first, across tenants', async () => {
      const due = await dueApprovals(t.db, new Date(Date.parse(at(100))), 10);
      expect(due).toEqual([
        {
          tenant: 'globex',
          runId: 'run-1',
          dispatchId: 'd1',
          approvalKey: globex1.approvalKey,
          inputDigest: globex1.inputDigest,
          policyRevision: 3,
          toolName: 'read_file',
          onTimeout: 'deny',
          expiresAt: at(90),
        },
        expect.objectContaining({ tenant: 'acme', dispatchId: 'd2', expiresAt: at(100) }),
      ]);
      expect(await dueApprovals(t.db, new Date(Date.parse(at(89))), 10)).toEqual([]);
      expect(await dueApprovals(t.db, new Date(Date.parse(at(10_000))), 2)).toHaveLength(2);
      // d7 expired at t=200 but was resolved: never due. d5 (t=5000) is.
      const all = await dueApprovals(t.db, new Date(Date.parse(at(10_000))), 100);
      expect(all.map((a) => `${a.tenant}/${a.dispatchId}`)).toEqual([
        'globex/d1',
        'acme/d2',
        'acme/d3',
        'acme/d5',
      ]);
    });
  });
});

describe('getRun and getDispatch while the projection folds (PostgreSQL)', () => {
  let t: JournalTestDb;
  beforeAll(async () => {
    t = await useJournalDb('queries-race');
  });
  afterAll(async () => {
    await t.cleanup();
  });

  /** Folds `entries` in one transaction and runs `read` over and over until twice after it commits. */
  const readWhileFolding = async (
    entries: Parameters<typeof applyEvents>[1],
    read: () => Promise<void>,
  ): Promise<void> => {
    let folded = false;
    const fold = t.db
      .transaction()
      .execute((trx) => applyEvents(trx, entries))
      .finally(() => (folded = true));
    for (let after = 0; after < 2;) {
      await read();
      if (folded) after += 1;
    }
    await fold;
  };

  it('reads a run in one snapshot: never suspended with nothing pending while a fold commits', async () => {
    // Each fold commits a dispatch row and its approval together — the call parked, then its
    // resolution — and reads race both: read across the commit, in either order of the tables, a
    // run could say `suspended` with nothing pending.
    let seq = 10_000;
    const torn: unknown[] = [];
    for (let k = 0; k < 100; k++) {
      const runId = `race-run-${k}`;
      const fx = dispatchFixture({ dispatchId: `race-${k}`, runId });
      const [requested, decided, suspended, resolved] = sequenced(
        [fx.requested(0), fx.decided(1, 'ask'), fx.suspended(1, 5000), fx.resolved(2, 'allow')],
        'race_journal',
        seq,
      );
      seq += 4;
      const read = async () => {
        const run = await getRun(t.db, 'acme', runId);
        if (run?.status === 'suspended' && run.pending.length !== 1) torn.push(run);
      };
      await readWhileFolding([requested!, decided!, suspended!], read);
      await readWhileFolding([resolved!], read);
    }
    expect(torn).toEqual([]);
  });

  it('reads a dispatch in one snapshot: its row never behind the history read with it', async () => {
    // The call is requested and decided already; the fold of its suspension races the reads.
    let seq = 20_000;
    const torn: unknown[] = [];
    for (let k = 0; k < 150; k++) {
      const fx = dispatchFixture({ dispatchId: `race-d-${k}`, runId: 'race-d' });
      const [requested, decided, suspended] = sequenced(
        [fx.requested(0), fx.decided(1, 'ask'), fx.suspended(1, 5000)],
        'race_journal',
        seq,
      );
      seq += 3;
      await t.db.transaction().execute((trx) => applyEvents(trx, [requested!, decided!]));
      await readWhileFolding([suspended!], async () => {
        const found = await getDispatch(t.db, 'acme', fx.dispatchId);
        if (found && found.events.length !== found.dispatch.eventCount) torn.push(found);
      });
    }
    expect(torn).toEqual([]);
  });
});
