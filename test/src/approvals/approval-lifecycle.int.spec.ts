import { headers as natsHeaders } from '@nats-io/transport-node';
import { ApiOperation, approvalKey, inputDigest } from '@toolgate/contracts';
import type { ApprovalView } from '@toolgate/contracts';
import { BROKER_SHAPES, eventually, startTestBroker, type TestBroker } from '@toolgate/testing';
import { runWhere, settled } from '../support/dispatch-probes';
import { serveHeldTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import {
  agent,
  countingTool,
  JOURNAL_AFTER_ALLOW,
  JOURNAL_AFTER_DENY,
  journalOf,
  park,
  resolve,
  unique,
  type CountingTool,
} from './approval-helpers';

/**
 * On one node with R1 streams and on a 3-node cluster with R3 streams: parking, resolving, replaying
 * a parked or settled call and the timeout decision all rest on reads of the journal that decide.
 */
describe.each(BROKER_SHAPES)(
  'approvals: ask → pending → resolve → settle, against real NATS and PostgreSQL, on $shape',
  (shape) => {
    let broker: TestBroker;
    let stack: TestStack;
    let gated: CountingTool;
    let other: CountingTool;
    let free: CountingTool;

    beforeAll(async () => {
      broker = await startTestBroker(shape, 'approvals-life');
      stack = await startTestStack('approvals-life', {}, broker);
      gated = await countingTool(stack, 'gated');
      other = await countingTool(stack, 'gated_other');
      free = await countingTool(stack, 'free');
      const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: {
          engine: {
            ask: [
              { id: 'gate-it', tool: ['gated', 'gated_other'], reason: 'a person looks first' },
            ],
          },
        },
      });
      expect(put.status).toBe(200);
    }, 120_000);
    afterAll(async () => {
      for (const t of [gated, other, free]) t?.stop();
      await stack?.stop();
      await broker?.cleanup();
    }, 60_000);

    it('parks an ask with its key, lists it with the run/tool/age filters, runs it once on allow and settles ok', async () => {
      const runId = unique('run-allow');
      const parked = await park(stack, 'gated', { runId });
      const otherParked = await park(stack, 'gated_other', { runId });
      const { approval } = parked;
      expect(approval).toMatchObject({
        tenant: 'acme',
        runId,
        status: 'pending',
        toolName: 'gated',
        // The list carries a preview of the input (the journal's JSON text of it).
        inputPreview: { json: `{"n": "${parked.input.n}"}`, truncated: false, summary: null },
        approvalKey: approvalKey('gated', parked.input),
        inputDigest: inputDigest(parked.input),
        submittedBy: 'acme-agent',
        onTimeout: 'deny',
      });
      expect(approval.rule).toMatchObject({ id: 'gate-it' });
      // Default window: 24 h from the suspension.
      expect(
        Date.parse(approval.expiresAt!) - Date.parse(approval.suspendedAt!),
      ).toBeGreaterThanOrEqual(86_400_000 - 5_000);
      expect(gated.runsOf(parked.input.n)).toBe(0);

      const byRun = await stack.http('GET', `/v1/approvals?runId=${runId}`, TOKENS.acmeApprover);
      expect(byRun.status).toBe(200);
      expect(byRun.body.approvals.map((a: ApprovalView) => a.dispatchId).sort()).toEqual(
        [parked.dispatchId, otherParked.dispatchId].sort(),
      );
      const byTool = await stack.http(
        'GET',
        `/v1/approvals?runId=${runId}&tool=gated_other`,
        TOKENS.acmeApprover,
      );
      expect(byTool.body.approvals.map((a: ApprovalView) => a.dispatchId)).toEqual([
        otherParked.dispatchId,
      ]);
      const elsewhere = await stack.http(
        'GET',
        `/v1/approvals?runId=${unique('no-such-run')}`,
        TOKENS.acmeApprover,
      );
      expect(elsewhere.body.approvals).toEqual([]);
      // An hour-old filter excludes both; once they are older than a few ms, a small one includes them.
      const old = await stack.http(
        'GET',
        `/v1/approvals?runId=${runId}&minAgeMs=3600000`,
        TOKENS.acmeApprover,
      );
      expect(old.body.approvals).toEqual([]);
      const aged = await eventually(
        async () => {
          const r = await stack.http(
            'GET',
            `/v1/approvals?runId=${runId}&minAgeMs=50`,
            TOKENS.acmeApprover,
          );
          return r.body.approvals.length === 2 ? r.body.approvals : undefined;
        },
        { what: 'both approvals older than 50 ms' },
      );
      expect(aged).toHaveLength(2);

      const res = await resolve(stack, approval.approvalKey, {
        decision: 'allow',
        reason: 'reviewed by ops',
      });
      expect(res.status).toBe(200);
      expect(res.body.resolved).toMatchObject({
        type: 'resolved',
        decision: 'allow',
        by: 'acme-approver',
        source: 'human',
        reason: 'reviewed by ops',
      });

      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch.outcome).toBe('ok');
      expect(view.dispatch.result).toEqual({ ran: parked.input });
      expect(gated.runsOf(parked.input.n)).toBe(1);
      expect(view.events.map((e) => e.event.type)).toEqual([
        'requested',
        'decided',
        'suspended',
        'resolved',
        'started',
        'settled',
      ]);
      expect(await journalOf(stack, parked)).toEqual(JOURNAL_AFTER_ALLOW);
      // No longer pending; the other call still is.
      const after = await eventually(
        async () => {
          const r = await stack.http('GET', `/v1/approvals?runId=${runId}`, TOKENS.acmeApprover);
          return r.body.approvals.length === 1 ? r.body.approvals : undefined;
        },
        { what: 'the resolved approval leaves the pending list' },
      );
      expect(after[0].dispatchId).toBe(otherParked.dispatchId);
      expect(other.runsOf(otherParked.input.n)).toBe(0);
    });

    it('journals who resolved, when, why and from where', async () => {
      const parked = await park(stack, 'gated');
      const before = Date.now();
      const res = await resolve(stack, parked.approval.approvalKey, {
        decision: 'allow',
        reason: 'ticket OPS-12',
      });
      expect(res.status).toBe(200);
      const view = await settled(stack, parked.dispatchId);
      const resolved = view.events.find((e) => e.event.type === 'resolved')!.event;
      expect(resolved).toMatchObject({
        decision: 'allow',
        by: 'acme-approver',
        source: 'human',
        reason: 'ticket OPS-12',
        approvalKey: parked.approval.approvalKey,
        inputDigest: parked.approval.inputDigest,
      });
      expect(Date.parse(resolved.at as string)).toBeGreaterThanOrEqual(before - 1_000);
      expect(view.dispatch).toMatchObject({
        decision: 'allow',
        resolvedBy: 'acme-approver',
        resolutionSource: 'human',
        resolutionReason: 'ticket OPS-12',
      });
      const listed = await eventually(
        async () => {
          const r = await stack.http(
            'GET',
            `/v1/approvals?runId=${parked.runId}&status=resolved`,
            TOKENS.acmeApprover,
          );
          return (r.body.approvals as ApprovalView[]).find(
            (a) => a.dispatchId === parked.dispatchId,
          );
        },
        { what: 'the resolution in the approvals projection' },
      );
      expect(listed).toMatchObject({
        status: 'resolved',
        decision: 'allow',
        resolvedBy: 'acme-approver',
        source: 'human',
        reason: 'ticket OPS-12',
      });
      expect(listed.resolvedAt).toBe(resolved.at);
    });

    it('denies with the reason, never running the tool', async () => {
      const parked = await park(stack, 'gated');
      const res = await resolve(stack, parked.approval.approvalKey, {
        decision: 'deny',
        reason: 'not on a Friday',
      });
      expect(res.status).toBe(200);
      expect(res.body.resolved).toMatchObject({ decision: 'deny', reason: 'not on a Friday' });
      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch.outcome).toBe('denied');
      expect(view.dispatch.error).toMatchObject({
        code: 'denied',
        message: expect.stringContaining('not on a Friday'),
      });
      expect(gated.runsOf(parked.input.n)).toBe(0);
      expect(await journalOf(stack, parked)).toEqual(JOURNAL_AFTER_DENY);
    });

    it.each([
      ['the string "yes"', 'yes'],
      ['an empty object', {}],
      ['null', null],
      ['upper-case "ALLOW"', 'ALLOW'],
      ['true', true],
      ['an object whose decision is "Allow"', { decision: 'Allow' }],
    ])('fails closed: %s denies', async (_label, decision) => {
      const parked = await park(stack, 'gated');
      const res = await resolve(stack, parked.approval.approvalKey, { decision });
      expect(res.status).toBe(200);
      expect(res.body.resolved.decision).toBe('deny');
      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch.outcome).toBe('denied');
      expect(gated.runsOf(parked.input.n)).toBe(0);
    });

    it('refuses a resolution without any decision as an invalid request, allowing nothing and journaling nothing', async () => {
      const parked = await park(stack, 'gated');
      const res = await resolve(stack, parked.approval.approvalKey, { reason: 'forgot to say' });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid-request');
      expect((await journalOf(stack, parked)).resolved).toBeUndefined();
      expect(gated.runsOf(parked.input.n)).toBe(0);
      const list = await stack.http(
        'GET',
        `/v1/approvals?runId=${parked.runId}`,
        TOKENS.acmeApprover,
      );
      expect(list.body.approvals.map((a: ApprovalView) => a.status)).toEqual(['pending']);
    });

    it('refuses a resolution naming a different input digest (approval-mismatch) and leaves the approval open', async () => {
      const parked = await park(stack, 'gated');
      const res = await resolve(stack, parked.approval.approvalKey, {
        decision: 'allow',
        inputDigest: inputDigest({ n: `${parked.input.n}-tampered` }),
      });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('approval-mismatch');
      expect((await journalOf(stack, parked)).resolved).toBeUndefined();
      // The matching digest goes through.
      const ok = await resolve(stack, parked.approval.approvalKey, {
        decision: 'allow',
        inputDigest: parked.approval.inputDigest,
      });
      expect(ok.status).toBe(200);
      expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
      expect(gated.runsOf(parked.input.n)).toBe(1);
    });

    it('never re-suspends or re-runs a settled dispatch: replay, and a late resolution', async () => {
      const parked = await park(stack, 'gated');
      expect(
        (await resolve(stack, parked.approval.approvalKey, { decision: 'allow' })).status,
      ).toBe(200);
      await settled(stack, parked.dispatchId);
      const replay = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, parked.body);
      expect(replay.body).toMatchObject({
        dispatchId: parked.dispatchId,
        status: 'replayed',
        state: 'settled',
        settled: { outcome: 'ok' },
      });
      const late = await resolve(stack, parked.approval.approvalKey, {
        decision: 'allow',
        dispatchId: parked.dispatchId,
        runId: parked.runId,
      });
      expect(late.status).toBe(409);
      expect(late.body.error).toMatchObject({
        code: 'already-resolved',
        details: { decision: 'allow', by: 'acme-approver' },
      });
      // Give any wrongly triggered work the time to show up in the journal before counting.
      await new Promise((r) => setTimeout(r, 500));
      expect(await journalOf(stack, parked)).toEqual(JOURNAL_AFTER_ALLOW);
      expect(gated.runsOf(parked.input.n)).toBe(1);
      const list = await stack.http(
        'GET',
        `/v1/approvals?runId=${parked.runId}`,
        TOKENS.acmeApprover,
      );
      expect(list.body.approvals).toEqual([]);
    });

    it('replays a parked call as the same parked dispatch, without a second suspension or notification', async () => {
      const parked = await park(stack, 'gated');
      const pending: string[] = [];
      const sub = stack.nats.nc.subscribe(stack.nats.subjects.approvals('acme', 'pending'), {
        callback: (_err, msg) =>
          void pending.push(
            (JSON.parse(new TextDecoder().decode(msg.data)) as { dispatchId: string }).dispatchId,
          ),
      });
      try {
        await stack.nats.nc.flush();
        const replay = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, parked.body);
        expect(replay.body).toMatchObject({
          dispatchId: parked.dispatchId,
          status: 'replayed',
          state: 'suspended',
        });
        // A call that does park, after the replay, shows the subscription is live when it arrives.
        const later = await park(stack, 'gated');
        await eventually(() => (pending.includes(later.dispatchId) ? true : undefined), {
          what: 'pending notification of a new ask',
        });
        expect(pending).not.toContain(parked.dispatchId);
        expect((await journalOf(stack, parked)).suspended).toBe(1);
        const list = await stack.http(
          'GET',
          `/v1/approvals?runId=${parked.runId}`,
          TOKENS.acmeApprover,
        );
        expect(list.body.approvals.map((a: ApprovalView) => a.dispatchId)).toEqual([
          parked.dispatchId,
        ]);
      } finally {
        sub.unsubscribe();
      }
    });

    it('resolves over NATS request/reply with the same scope check and first-closing-wins answer', async () => {
      const parked = await park(stack, 'gated');
      const ask = async (token: string, body: unknown) => {
        const h = natsHeaders();
        h.set('Authorization', `Bearer ${token}`);
        const reply = await stack.nats.nc.request(
          stack.nats.subjects.api(ApiOperation.ResolveApproval),
          JSON.stringify(body),
          { headers: h, timeout: 10_000 },
        );
        return JSON.parse(new TextDecoder().decode(reply.data)) as {
          ok: boolean;
          data?: any;
          error?: { code: string; details?: any };
        };
      };
      const body = { key: parked.approval.approvalKey, decision: 'allow', reason: 'over the bus' };
      const refused = await ask(TOKENS.acmeAgent, body);
      expect(refused).toMatchObject({ ok: false, error: { code: 'forbidden' } });
      const won = await ask(TOKENS.acmeApprover, body);
      expect(won).toMatchObject({
        ok: true,
        data: {
          resolved: {
            decision: 'allow',
            by: 'acme-approver',
            source: 'human',
            reason: 'over the bus',
          },
        },
      });
      const lost = await ask(TOKENS.acmeAdmin, {
        ...body,
        decision: 'deny',
        dispatchId: parked.dispatchId,
        runId: parked.runId,
      });
      expect(lost).toMatchObject({
        ok: false,
        error: { code: 'already-resolved', details: { decision: 'allow', by: 'acme-approver' } },
      });
      expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
      expect(gated.runsOf(parked.input.n)).toBe(1);
    });

    it('reports a run suspended only when all its in-flight dispatches are parked, with every open approval', async () => {
      const runId = unique('run-status');
      const a = await park(stack, 'gated', { runId });
      const b = await park(stack, 'gated_other', { runId });
      const ok = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId,
        callId: unique('free'),
        agent,
        tool: 'free',
        input: { n: unique('free') },
        wait: 10_000,
      });
      expect(ok.body.state).toBe('settled');
      const run = await runWhere(
        stack,
        runId,
        (r) => r.status === 'suspended' && r.pending.length === 2,
        { timeoutMs: 20_000, what: 'run suspended with two open approvals' },
      );
      const pending = [...run.pending].sort((x, y) => x.dispatchId.localeCompare(y.dispatchId));
      const expected = [a, b]
        .sort((x, y) => x.dispatchId.localeCompare(y.dispatchId))
        .map((p) => ({
          key: p.approval.approvalKey,
          dispatchId: p.dispatchId,
          tool: p.approval.toolName,
          inputPreview: p.approval.inputPreview,
          rule: expect.objectContaining({ id: 'gate-it' }),
          since: p.approval.suspendedAt,
          expires: p.approval.expiresAt,
        }));
      expect(pending).toEqual(expected);
      for (const p of pending) {
        expect(Date.parse(p.expires)).toBeGreaterThan(Date.parse(p.since));
      }

      // One resolved and running no longer parked: with the other still parked the run is suspended
      // again only once the allowed call has settled.
      expect((await resolve(stack, a.approval.approvalKey, { decision: 'allow' })).status).toBe(
        200,
      );
      await settled(stack, a.dispatchId);
      const still = await runWhere(
        stack,
        runId,
        (r) => r.status === 'suspended' && r.pending.length === 1,
        { what: 'run suspended with one open approval' },
      );
      expect(still.pending[0]!.dispatchId).toBe(b.dispatchId);
      expect((await resolve(stack, b.approval.approvalKey, { decision: 'deny' })).status).toBe(200);
      const done = await runWhere(stack, runId, (r) => r.status === 'settled', {
        what: 'run settled',
      });
      expect(done.pending).toEqual([]);
    });

    it('reports a run with a parked call and a call still running as running, not suspended', async () => {
      const worker = await serveHeldTool(stack, 'held', 'released');
      try {
        const runId = unique('run-mixed');
        const parked = await park(stack, 'gated', { runId });
        const running = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId,
          callId: unique('held'),
          agent,
          tool: 'held',
          input: {},
        });
        await eventually(
          async () => {
            const d = await stack.http(
              'GET',
              `/v1/dispatches/${running.body.dispatchId}`,
              TOKENS.acmeAgent,
            );
            return d.body?.dispatch?.status === 'started' ? true : undefined;
          },
          { what: 'held call started' },
        );
        const run = await stack.http('GET', `/v1/runs/${runId}`, TOKENS.acmeAgent);
        expect(run.body.status).toBe('running');
        expect(run.body.pending.map((p: { dispatchId: string }) => p.dispatchId)).toEqual([
          parked.dispatchId,
        ]);
        worker.release();
        await settled(stack, running.body.dispatchId);
        const after = await runWhere(stack, runId, (r) => r.status === 'suspended', {
          what: 'run suspended once the running call settled',
        });
        expect(after.pending.map((p) => p.dispatchId)).toEqual([parked.dispatchId]);
      } finally {
        worker.release();
        worker.stop();
      }
    });

    it('applies the policy timeout decision on its own: deny by default, allow when configured, with source timeout', async () => {
      const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: {
          engine: {
            ask: [
              { id: 'gate-it', tool: ['gated', 'gated_other'], reason: 'a person looks first' },
              { id: 'timed-deny', tool: 'timed_deny', approvalTimeoutMs: 300 },
              {
                id: 'timed-allow',
                tool: 'timed_allow',
                approvalTimeoutMs: 300,
                onTimeout: 'allow',
              },
            ],
          },
        },
      });
      expect(put.status).toBe(200);
      const timedDeny = await countingTool(stack, 'timed_deny');
      const timedAllow = await countingTool(stack, 'timed_allow');
      try {
        const runId = unique('run-timeout');
        // Nobody resolves: the journal's running sweeper (every 100 ms here) applies onTimeout.
        const d = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId,
          callId: 'td',
          agent,
          tool: 'timed_deny',
          input: { n: 'td' },
        });
        const a = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId,
          callId: 'ta',
          agent,
          tool: 'timed_allow',
          input: { n: 'ta' },
        });
        const denied = await settled(stack, d.body.dispatchId, 30_000);
        const allowed = await settled(stack, a.body.dispatchId, 30_000);

        const deniedResolution = denied.events.find((e) => e.event.type === 'resolved')!.event;
        expect(deniedResolution).toMatchObject({
          decision: 'deny',
          source: 'timeout',
          by: 'system:timeout',
        });
        expect(denied.events.find((e) => e.event.type === 'suspended')!.event).toMatchObject({
          onTimeout: 'deny',
        });
        expect(denied.dispatch.outcome).toBe('denied');
        expect(timedDeny.calls).toHaveLength(0);

        const allowedResolution = allowed.events.find((e) => e.event.type === 'resolved')!.event;
        expect(allowedResolution).toMatchObject({
          decision: 'allow',
          source: 'timeout',
          by: 'system:timeout',
        });
        expect(allowed.dispatch.outcome).toBe('ok');
        expect(timedAllow.calls).toEqual([{ n: 'ta' }]);
        for (const v of [denied, allowed]) {
          const s = v.events.find((e) => e.event.type === 'suspended')!.event;
          expect(Date.parse(s.expiresAt as string) - Date.parse(s.at as string)).toBe(300);
          expect(v.events.filter((e) => e.event.type === 'resolved')).toHaveLength(1);
        }
      } finally {
        timedDeny.stop();
        timedAllow.stop();
      }
    });
  },
);
