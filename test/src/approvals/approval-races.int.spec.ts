import type { ApprovalView } from '@toolgate/contracts';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import {
  countingTool,
  journalOf,
  park,
  resolve,
  unique,
  type CountingTool,
} from './approval-helpers';

describe('approvals: racing resolutions, tenants, scopes and separation of duties', () => {
  let stack: TestStack;
  let gated: CountingTool;
  let raced: CountingTool;

  beforeAll(async () => {
    // The periodic sweeper is held back, so this file's timeouts happen only when a test sweeps.
    stack = await startTestStack('approvals-race', { JOURNAL_SWEEP_INTERVAL_MS: '3600000' });
    gated = await countingTool(stack, 'gated');
    raced = await countingTool(stack, 'raced');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          ask: [
            { id: 'gate-it', tool: 'gated' },
            // Expires at once: the timeout is due as soon as the sweeper looks.
            { id: 'race-it', tool: 'raced', approvalTimeoutMs: 1 },
          ],
        },
      },
    });
    expect(put.status).toBe(200);
  });
  afterAll(async () => {
    gated?.stop();
    raced?.stop();
    await stack.stop();
  });

  it('settles 20 concurrent resolutions of one approval on exactly one; 19 get already-resolved naming the winner', async () => {
    const parked = await park(stack, 'gated');
    const attempts = Array.from({ length: 20 }, (_, i) =>
      resolve(
        stack,
        parked.approval.approvalKey,
        {
          decision: i % 2 === 0 ? 'allow' : 'deny',
          reason: `attempt ${i}`,
          dispatchId: parked.dispatchId,
          runId: parked.runId,
        },
        i % 3 === 0 ? TOKENS.acmeAdmin : TOKENS.acmeApprover,
      ),
    );
    const results = await Promise.all(attempts);
    const winners = results.filter((r) => r.status === 200);
    const losers = results.filter((r) => r.status !== 200);
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(19);
    const won = winners[0]!.body.resolved;
    for (const loser of losers) {
      expect(loser.status).toBe(409);
      expect(loser.body.error).toMatchObject({
        code: 'already-resolved',
        details: {
          decision: won.decision,
          by: won.by,
          source: 'human',
          at: won.at,
          dispatchId: parked.dispatchId,
        },
      });
    }
    const view = await settled(stack, parked.dispatchId);
    expect(view.dispatch.outcome).toBe(won.decision === 'allow' ? 'ok' : 'denied');
    expect(
      view.events.filter((e) => e.event.type === 'resolved').map((e) => e.event.reason),
    ).toEqual([won.reason]);
    expect(gated.runsOf(parked.input.n)).toBe(won.decision === 'allow' ? 1 : 0);
    expect(await journalOf(stack, parked)).toMatchObject({
      resolved: 1,
      settled: 1,
    });
  });

  it('lets exactly one decision apply when the timeout races a person', async () => {
    // The person starts a little later each round, so either side can win; who does is not asserted.
    for (const delayMs of [0, 10, 30, 100]) {
      const parked = await park(stack, 'raced');
      expect(
        Date.parse(parked.approval.expiresAt!) - Date.parse(parked.approval.suspendedAt!),
      ).toBe(1);
      const [swept, person] = await Promise.all([
        stack.all.journal.sweeper.sweep(),
        new Promise((r) => setTimeout(r, delayMs)).then(() =>
          resolve(stack, parked.approval.approvalKey, {
            decision: 'allow',
            reason: 'a person was quicker',
            dispatchId: parked.dispatchId,
            runId: parked.runId,
          }),
        ),
      ]);
      const view = await settled(stack, parked.dispatchId);
      const resolutions = view.events
        .filter((e) => e.event.type === 'resolved')
        .map((e) => e.event);
      expect(resolutions).toHaveLength(1);
      expect((await journalOf(stack, parked)).resolved).toBe(1);
      const [resolution] = resolutions;
      if (person.status === 200) {
        expect(swept).toBe(0);
        expect(resolution).toMatchObject({
          decision: 'allow',
          source: 'human',
          by: 'acme-approver',
        });
        expect(view.dispatch.outcome).toBe('ok');
        expect(raced.runsOf(parked.input.n)).toBe(1);
      } else {
        expect(swept).toBe(1);
        expect(person.status).toBe(409);
        expect(person.body.error).toMatchObject({
          code: 'already-resolved',
          details: { decision: 'deny', source: 'timeout', by: 'system:timeout' },
        });
        expect(resolution).toMatchObject({
          decision: 'deny',
          source: 'timeout',
          by: 'system:timeout',
        });
        expect(view.dispatch.outcome).toBe('denied');
        expect(raced.runsOf(parked.input.n)).toBe(0);
      }
    }
  });

  it('lets several sweepers (replicas) race the same due approval: one resolution', async () => {
    const parked = await park(stack, 'raced');
    const won = await Promise.all([1, 2, 3, 4].map(() => stack.all.journal.sweeper.sweep()));
    expect(won.reduce((a, b) => a + b, 0)).toBe(1);
    const view = await settled(stack, parked.dispatchId);
    expect(view.events.filter((e) => e.event.type === 'resolved')).toHaveLength(1);
    expect(view.dispatch.outcome).toBe('denied');
  });

  it('hides an approval from another tenant, which can neither list nor resolve it, and journals nothing', async () => {
    const parked = await park(stack, 'gated');
    const listed = await stack.http('GET', '/v1/approvals?status=all', TOKENS.globexAdmin);
    expect(listed.status).toBe(200);
    expect(
      (listed.body.approvals as ApprovalView[]).some(
        (a) => a.dispatchId === parked.dispatchId || a.tenant === 'acme',
      ),
    ).toBe(false);
    const filtered = await stack.http(
      'GET',
      `/v1/approvals?runId=${parked.runId}`,
      TOKENS.globexAdmin,
    );
    expect(filtered.body.approvals).toEqual([]);

    const byKey = await resolve(
      stack,
      parked.approval.approvalKey,
      { decision: 'allow' },
      TOKENS.globexAdmin,
    );
    expect(byKey.status).toBe(404);
    expect(byKey.body.error.code).toBe('not-found');
    const byDispatch = await resolve(
      stack,
      parked.approval.approvalKey,
      { decision: 'allow', dispatchId: parked.dispatchId, runId: parked.runId },
      TOKENS.globexAdmin,
    );
    expect(byDispatch.status).toBe(404);
    expect(byDispatch.body.error.code).toBe('not-found');
    const dispatch = await stack.http(
      'GET',
      `/v1/dispatches/${parked.dispatchId}`,
      TOKENS.globexAdmin,
    );
    expect(dispatch.status).toBe(404);

    expect(await journalOf(stack, parked, 'globex')).toEqual({});
    expect((await journalOf(stack, parked)).resolved).toBeUndefined();
    // Still pending for its own tenant, and resolvable there.
    const own = await resolve(stack, parked.approval.approvalKey, { decision: 'allow' });
    expect(own.status).toBe(200);
    expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
  });

  it('refuses listing and resolving without the approve scope: 403 forbidden, nothing journaled', async () => {
    const parked = await park(stack, 'gated');
    const list = await stack.http('GET', '/v1/approvals', TOKENS.acmeAgent);
    expect(list.status).toBe(403);
    expect(list.body.error.code).toBe('forbidden');
    const res = await resolve(
      stack,
      parked.approval.approvalKey,
      { decision: 'allow' },
      TOKENS.acmeAgent,
    );
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'forbidden', message: expect.any(String) });
    const anonymous = await resolve(stack, parked.approval.approvalKey, { decision: 'allow' }, '');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('unauthorized');
    const events = await fetch(`${stack.all.gateway.url}/v1/approvals/events`, {
      headers: { authorization: `Bearer ${TOKENS.acmeAgent}` },
    });
    expect(events.status).toBe(403);
    expect(((await events.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect((await journalOf(stack, parked)).resolved).toBeUndefined();
    expect(gated.runsOf(parked.input.n)).toBe(0);
    expect((await resolve(stack, parked.approval.approvalKey, { decision: 'deny' })).status).toBe(
      200,
    );
  });

  it('enforces separation of duties: the submitter cannot approve its own call, another approver can', async () => {
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: { ask: [{ id: 'gate-it', tool: 'gated' }] },
        approvals: { separationOfDuties: true },
      },
    });
    expect(put.status).toBe(200);
    try {
      // acme-admin may both dispatch and approve: it submits this one.
      const parked = await park(stack, 'gated', {
        token: TOKENS.acmeAdmin,
        runId: unique('run-sod'),
      });
      expect(parked.approval.submittedBy).toBe('acme-admin');
      const own = await resolve(
        stack,
        parked.approval.approvalKey,
        { decision: 'allow' },
        TOKENS.acmeAdmin,
      );
      expect(own.status).toBe(403);
      expect(own.body.error.code).toBe('forbidden');
      expect((await journalOf(stack, parked)).resolved).toBeUndefined();
      const other = await resolve(
        stack,
        parked.approval.approvalKey,
        { decision: 'allow', reason: 'four eyes' },
        TOKENS.acmeApprover,
      );
      expect(other.status).toBe(200);
      expect(other.body.resolved).toMatchObject({ decision: 'allow', by: 'acme-approver' });
      expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
      expect(gated.runsOf(parked.input.n)).toBe(1);
    } finally {
      await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: {
          engine: {
            ask: [
              { id: 'gate-it', tool: 'gated' },
              { id: 'race-it', tool: 'raced', approvalTimeoutMs: 1 },
            ],
          },
        },
      });
    }
    // Without separation of duties the same identity may approve what it submitted.
    const parked = await park(stack, 'gated', { token: TOKENS.acmeAdmin });
    const own = await resolve(
      stack,
      parked.approval.approvalKey,
      { decision: 'allow' },
      TOKENS.acmeAdmin,
    );
    expect(own.status).toBe(200);
    expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
  });
});
