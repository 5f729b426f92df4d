import type { ApprovalView } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import {
  gatedTool,
  JOURNAL_AFTER_ALLOW,
  JOURNAL_AFTER_DENY,
  journalOf,
  park,
  resolve,
  type CountingTool,
} from './approval-helpers';

describe('approvals survive stopped services', () => {
  let stack: TestStack;
  let gated: CountingTool;

  beforeAll(async () => {
    stack = await startTestStack('approvals-durable');
    gated = await gatedTool(stack);
  }, 60_000);
  afterAll(async () => {
    gated?.stop();
    await stack.stop();
  });

  it('applies a resolution made while the executor is down when it comes back, running the call once', async () => {
    const parked = await park(stack, 'gated');
    await stack.all.executor.stop();
    let restarted = false;
    try {
      const res = await resolve(stack, parked.approval.approvalKey, {
        decision: 'allow',
        reason: 'approved during maintenance',
      });
      expect(res.status).toBe(200);
      // Nothing can run it yet: the resolution waits in the journal.
      await eventually(
        async () => {
          const d = await stack.http(
            'GET',
            `/v1/dispatches/${parked.dispatchId}`,
            TOKENS.acmeAgent,
          );
          return d.body?.dispatch?.status === 'resolved' ? true : undefined;
        },
        { what: 'resolution folded while the executor is down' },
      );
      expect(gated.runsOf(parked.input.n)).toBe(0);

      stack.all.executor = await stack.startExecutor();
      restarted = true;
      const view = await settled(stack, parked.dispatchId, 30_000);
      expect(view.dispatch.outcome).toBe('ok');
      expect(view.dispatch.result).toEqual({ ran: parked.input });
      expect(gated.runsOf(parked.input.n)).toBe(1);
      expect(await journalOf(stack, parked)).toEqual(JOURNAL_AFTER_ALLOW);
    } finally {
      if (!restarted) stack.all.executor = await stack.startExecutor();
    }
  }, 120_000);

  it('keeps a parked call listed and resolvable across a restart of the whole stack', async () => {
    const parked = await park(stack, 'gated');
    await stack.restart();
    const listed = await eventually(
      async () => {
        const r = await stack.http(
          'GET',
          `/v1/approvals?runId=${parked.runId}`,
          TOKENS.acmeApprover,
        );
        return (r.body?.approvals as ApprovalView[] | undefined)?.find(
          (a) => a.dispatchId === parked.dispatchId,
        );
      },
      { timeoutMs: 20_000, what: 'approval listed after restart' },
    );
    expect(listed).toMatchObject({
      status: 'pending',
      approvalKey: parked.approval.approvalKey,
      expiresAt: parked.approval.expiresAt,
    });
    const run = await stack.http('GET', `/v1/runs/${parked.runId}`, TOKENS.acmeAgent);
    expect(run.body).toMatchObject({
      status: 'suspended',
      pending: [{ dispatchId: parked.dispatchId, key: parked.approval.approvalKey }],
    });
    expect(gated.runsOf(parked.input.n)).toBe(0);

    // By key alone: the restarted gateway finds it through the projection.
    const res = await resolve(stack, parked.approval.approvalKey, {
      decision: 'allow',
      reason: 'after the restart',
    });
    expect(res.status).toBe(200);
    const view = await settled(stack, parked.dispatchId, 30_000);
    expect(view.dispatch.outcome).toBe('ok');
    expect(gated.runsOf(parked.input.n)).toBe(1);
    expect(await journalOf(stack, parked)).toMatchObject({
      suspended: 1,
      resolved: 1,
      settled: 1,
    });
  }, 120_000);

  it('replays a call settled before a restart without suspending it again', async () => {
    const parked = await park(stack, 'gated');
    expect(
      (await resolve(stack, parked.approval.approvalKey, { decision: 'deny', reason: 'no' }))
        .status,
    ).toBe(200);
    await settled(stack, parked.dispatchId);
    await stack.restart();
    const replay = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, parked.body);
    expect(replay.body).toMatchObject({
      dispatchId: parked.dispatchId,
      status: 'replayed',
      state: 'settled',
      settled: { outcome: 'denied' },
    });
    const list = await stack.http(
      'GET',
      `/v1/approvals?runId=${parked.runId}`,
      TOKENS.acmeApprover,
    );
    expect(list.body.approvals).toEqual([]);
    expect(await journalOf(stack, parked)).toEqual(JOURNAL_AFTER_DENY);
    expect(gated.runsOf(parked.input.n)).toBe(0);
  }, 120_000);
});
