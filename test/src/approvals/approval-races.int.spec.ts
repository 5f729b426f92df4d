import type { ApprovalView } from '@toolgate/contracts';
import { BROKER_SHAPES, eventually, startTestBroker, type TestBroker } from '@toolgate/testing';
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

/**
 * A stack whose policy parks every call of `gated` and of `raced` (whose approval expires at once),
 * with the periodic sweeper held back, so a timeout happens only when a test sweeps. On `broker`'s
 * nodes and stream replicas when one is given.
 */
async function startApprovalStack(label: string, broker?: TestBroker) {
  const stack = await startTestStack(
    label,
    {
      JOURNAL_SWEEP_INTERVAL_MS: '3600000',
      ...(broker ? { TOOLGATE_STREAM_REPLICAS: broker.env.TOOLGATE_STREAM_REPLICAS } : {}),
    },
    broker ? { servers: broker.servers } : undefined,
  );
  const gated = await countingTool(stack, 'gated');
  const raced = await countingTool(stack, 'raced');
  const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
    document: {
      engine: {
        ask: [
          { id: 'gate-it', tool: 'gated' },
          // Expires at once: the timeout is due as soon as the sweeper looks.
          { id: 'race-it', tool: 'raced', approvalTimeoutMs: 1 },
          { id: 'shell-rm', tool: 'shell', argv: 'rm **' },
        ],
      },
    },
  });
  expect(put.status).toBe(200);
  return { stack, gated, raced };
}

/**
 * First resolution wins at the broker, and the losers are told who won: on one node with R1 streams
 * and on a 3-node cluster with R3 streams, where the winner is read back from the stream's leader.
 */
describe.each(BROKER_SHAPES)('approvals: racing resolutions on $shape', (shape) => {
  let broker: TestBroker;
  let stack: TestStack;
  let gated: CountingTool;
  let raced: CountingTool;

  beforeAll(async () => {
    broker = await startTestBroker(shape, 'approvals');
    ({ stack, gated, raced } = await startApprovalStack('approvals-race', broker));
    const journal = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream);
    expect(journal.config.num_replicas).toBe(shape.replicas);
  }, 120_000);
  afterAll(async () => {
    gated?.stop();
    raced?.stop();
    await stack?.stop();
    await broker?.cleanup();
  }, 60_000);

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
        // The person's request landed first, but after the 1 ms window: the policy's onTimeout
        // decided it, not the person (a late sweeper never leaves the call to a late click).
        expect(swept).toBe(0);
        expect(resolution).toMatchObject({
          decision: 'deny',
          source: 'timeout',
          by: 'system:timeout',
        });
        expect(resolution?.reason).toContain('asked by acme-approver');
        expect(view.dispatch.outcome).toBe('denied');
        expect(raced.runsOf(parked.input.n)).toBe(0);
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

  /**
   * What the broker's shape does not change, on one node only: shared keys, tenants, scopes and
   * separation of duties. On the same stack as the races (every call has a key, run and input of
   * its own; the only listing across calls is another tenant's, which holds none of them).
   */
  if (shape.replicas === 1)
    describe('shared keys, tenants, scopes and separation of duties', () => {
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

      it('lets a token without the approve scope read approvals but never resolve one: 403 forbidden, nothing journaled', async () => {
        const parked = await park(stack, 'gated');
        const list = await stack.http(
          'GET',
          `/v1/approvals?runId=${parked.runId}`,
          TOKENS.acmeAgent,
        );
        expect(list.status).toBe(200);
        expect(list.body.approvals.map((a: ApprovalView) => a.dispatchId)).toEqual([
          parked.dispatchId,
        ]);
        const detail = await stack.http(
          'GET',
          `/v1/approvals/${parked.approval.approvalKey}?dispatchId=${parked.dispatchId}`,
          TOKENS.acmeAgent,
        );
        expect(detail.status).toBe(200);
        expect(detail.body.approval).toMatchObject({
          dispatchId: parked.dispatchId,
          status: 'pending',
        });
        const res = await resolve(
          stack,
          parked.approval.approvalKey,
          { decision: 'allow' },
          TOKENS.acmeAgent,
        );
        expect(res.status).toBe(403);
        expect(res.body.error).toMatchObject({ code: 'forbidden', message: expect.any(String) });
        const anonymous = await resolve(
          stack,
          parked.approval.approvalKey,
          { decision: 'allow' },
          '',
        );
        expect(anonymous.status).toBe(401);
        expect(anonymous.body.error.code).toBe('unauthorized');
        const anonymousList = await stack.http('GET', '/v1/approvals', undefined);
        expect(anonymousList.status).toBe(401);
        const abort = new AbortController();
        const events = await fetch(`${stack.all.gateway.url}/v1/approvals/events`, {
          headers: { authorization: `Bearer ${TOKENS.acmeAgent}` },
          signal: abort.signal,
        });
        expect(events.status).toBe(200);
        expect(events.headers.get('content-type')).toContain('text/event-stream');
        abort.abort();
        const unauthenticatedEvents = await fetch(`${stack.all.gateway.url}/v1/approvals/events`);
        expect(unauthenticatedEvents.status).toBe(401);
        expect((await journalOf(stack, parked)).resolved).toBeUndefined();
        expect(gated.runsOf(parked.input.n)).toBe(0);
        expect(
          (await resolve(stack, parked.approval.approvalKey, { decision: 'deny' })).status,
        ).toBe(200);
      });

      it('tells a token who it is: tenant, identity and scopes (and no trace UI: none configured)', async () => {
        expect(await stack.http('GET', '/v1/whoami', TOKENS.acmeAgent)).toEqual({
          status: 200,
          body: {
            tenant: 'acme',
            identity: 'acme-agent',
            scopes: ['dispatch'],
            traceUrlTemplate: null,
          },
        });
        expect((await stack.http('GET', '/v1/whoami', 'not-a-token')).status).toBe(401);
      });

      it('refuses a key two runs share with conflict, listing both calls, and resolves only a named one', async () => {
        const n = unique('shared');
        const first = await park(stack, 'gated', { n });
        const second = await park(stack, 'gated', { n });
        const key = first.approval.approvalKey;
        expect(second.approval.approvalKey).toBe(key);
        expect(second.runId).not.toBe(first.runId);

        const ambiguous = await resolve(stack, key, { decision: 'allow' });
        expect(ambiguous.status).toBe(409);
        expect(ambiguous.body.error).toMatchObject({
          code: 'conflict',
          details: {
            key,
            matches: [
              { dispatchId: first.dispatchId, runId: first.runId, toolName: 'gated' },
              { dispatchId: second.dispatchId, runId: second.runId, toolName: 'gated' },
            ],
          },
        });
        expect(ambiguous.body.error.details.matches).toHaveLength(2);
        const detail = await stack.http('GET', `/v1/approvals/${key}`, TOKENS.acmeApprover);
        expect(detail.status).toBe(409);
        expect(detail.body.error.code).toBe('conflict');
        expect((await journalOf(stack, first)).resolved).toBeUndefined();
        expect((await journalOf(stack, second)).resolved).toBeUndefined();

        // Named by its run, the key is one call again; named by dispatch, the other.
        const byRun = await resolve(stack, key, { decision: 'deny', runId: second.runId });
        expect(byRun.status).toBe(200);
        expect(byRun.body.resolved).toMatchObject({
          dispatchId: second.dispatchId,
          decision: 'deny',
        });
        const byDispatch = await resolve(stack, key, {
          decision: 'allow',
          dispatchId: first.dispatchId,
        });
        expect(byDispatch.status).toBe(200);
        expect(byDispatch.body.resolved).toMatchObject({ dispatchId: first.dispatchId });
        expect((await settled(stack, first.dispatchId)).dispatch.outcome).toBe('ok');
        expect((await settled(stack, second.dispatchId)).dispatch.outcome).toBe('denied');
        expect(gated.runsOf(n)).toBe(1);
        // With none pending, the key alone hears who resolved it last.
        const late = await resolve(stack, key, { decision: 'allow' });
        expect(late.status).toBe(409);
        expect(late.body.error.code).toBe('already-resolved');
      });

      it('shows one approval from the journal: the call, why it asked, and for shell the segment that asked; then its outcome', async () => {
        const runId = unique('run-shell');
        const submitted = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId,
          callId: unique('call'),
          agent: { agentType: 'coder' },
          tool: 'shell',
          input: { command: 'ls && rm -rf no-such-dir' },
          wait: 10_000,
        });
        expect(submitted.body.state).toBe('suspended');
        const dispatchId = submitted.body.dispatchId as string;
        const listed = await eventually(
          async () =>
            (await stack.http('GET', `/v1/approvals?runId=${runId}`, TOKENS.acmeApprover)).body
              .approvals[0] as ApprovalView | undefined,
          { what: 'the shell call listed' },
        );
        // Straight from the journal with the run named; through the projection without it.
        for (const query of [
          `dispatchId=${dispatchId}&runId=${runId}`,
          `dispatchId=${dispatchId}`,
        ]) {
          const detail = await stack.http(
            'GET',
            `/v1/approvals/${listed.approvalKey}?${query}`,
            TOKENS.acmeApprover,
          );
          expect(detail.status).toBe(200);
          expect(detail.body).toEqual({
            approval: expect.objectContaining({
              dispatchId,
              runId,
              status: 'pending',
              toolName: 'shell',
              input: { command: 'ls && rm -rf no-such-dir' },
              inputDigest: listed.inputDigest,
              policyRevision: listed.policyRevision,
              decidedBy: 'ask-rule',
              rule: expect.objectContaining({ id: 'shell-rm', argv: 'rm **' }),
              expiresAt: listed.expiresAt,
              settled: null,
            }),
            askReason: expect.any(String),
            risk: 'execute',
            shell: {
              command: 'ls && rm -rf no-such-dir',
              scope: 'segments',
              segments: [
                { argv: ['ls'], asked: false, why: null, unmatchable: null },
                {
                  argv: ['rm', '-rf', 'no-such-dir'],
                  asked: true,
                  why: 'matches rm **',
                  unmatchable: null,
                },
              ],
            },
            elided: [],
            shellElided: false,
          });
        }
        const other = await stack.http(
          'GET',
          `/v1/approvals/${'0'.repeat(64)}?dispatchId=${dispatchId}&runId=${runId}`,
          TOKENS.acmeApprover,
        );
        expect(other.status).toBe(404);
        const bad = await stack.http('GET', '/v1/approvals/not-a-key', TOKENS.acmeApprover);
        expect(bad.status).toBe(400);

        const denied = await resolve(stack, listed.approvalKey, {
          decision: 'deny',
          reason: 'not today',
          dispatchId,
          runId,
        });
        expect(denied.status).toBe(200);
        await settled(stack, dispatchId);
        const after = await stack.http(
          'GET',
          `/v1/approvals/${listed.approvalKey}?dispatchId=${dispatchId}&runId=${runId}`,
          TOKENS.acmeApprover,
        );
        expect(after.body.approval).toMatchObject({
          status: 'resolved',
          decision: 'deny',
          reason: 'not today',
          resolvedBy: 'acme-approver',
          settled: { outcome: 'denied' },
        });
        // The history lists it newest first, with the same outcome once the projection has it.
        const history = await eventually(
          async () => {
            const res = await stack.http(
              'GET',
              '/v1/approvals?status=resolved&order=newest&limit=5',
              TOKENS.acmeApprover,
            );
            const top = res.body.approvals[0] as ApprovalView;
            return top.dispatchId === dispatchId && top.settled ? top : undefined;
          },
          { what: 'the denied shell call at the top of the history, settled' },
        );
        expect(history).toMatchObject({ decision: 'deny', settled: { outcome: 'denied' } });
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
                  { id: 'shell-rm', tool: 'shell', argv: 'rm **' },
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
});
