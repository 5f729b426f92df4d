import { headers as natsHeaders } from '@nats-io/transport-node';
import { ApiOperation } from '@toolgate/contracts';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { gatedTool, park, unique, type CountingTool, type Parked } from './approval-helpers';

/**
 * Every list reply is paged: the approvals list and a run's dispatches are read page by page with
 * `limit` and `cursor`, on HTTP and on the bus alike, and a limit out of range or a cursor that
 * does not continue the list (garbage, another order's, another list's) is `invalid-request`.
 */
describe('approvals: paging on HTTP and the bus', () => {
  let stack: TestStack;
  let gated: CountingTool;
  const runId = unique('run-pages');
  let parked: Parked[];

  beforeAll(async () => {
    stack = await startTestStack('approvals-paging');
    gated = await gatedTool(stack);
    parked = [];
    for (let i = 0; i < 3; i++) parked.push(await park(stack, 'gated', { runId }));
  }, 60_000);
  afterAll(async () => {
    gated?.stop();
    await stack?.stop();
  });

  const listApprovals = (query: string) =>
    stack.http('GET', `/v1/approvals?runId=${runId}&${query}`, TOKENS.acmeApprover);

  /** One gateway operation over NATS request/reply, as a team's client sends it. */
  const overBus = async (operation: ApiOperation, body: unknown) => {
    const h = natsHeaders();
    h.set('Authorization', `Bearer ${TOKENS.acmeApprover}`);
    const reply = await stack.nats.nc.request(
      stack.nats.subjects.api(operation),
      JSON.stringify(body),
      { headers: h, timeout: 10_000 },
    );
    return JSON.parse(new TextDecoder().decode(reply.data)) as {
      ok: boolean;
      data?: any;
      error?: { code: string };
    };
  };

  it('reads every approval once, a page at a time, in the order asked for', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { status: number; body: any } = await listApprovals(
        `limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(page.status).toBe(200);
      expect(page.body.approvals).toHaveLength(1);
      seen.push(page.body.approvals[0].dispatchId);
      cursor = page.body.nextCursor;
    } while (cursor && seen.length < 10);
    expect(seen).toEqual(parked.map((p) => p.dispatchId));

    // The bus answers the same pages.
    const first = await overBus(ApiOperation.ListApprovals, { runId, limit: 2 });
    expect(first.ok).toBe(true);
    expect(first.data.approvals.map((a: { dispatchId: string }) => a.dispatchId)).toEqual(
      seen.slice(0, 2),
    );
    const rest = await overBus(ApiOperation.ListApprovals, {
      runId,
      limit: 2,
      cursor: first.data.nextCursor,
    });
    expect(rest.data.approvals.map((a: { dispatchId: string }) => a.dispatchId)).toEqual(
      seen.slice(2),
    );
    expect(rest.data.nextCursor).toBeNull();
  });

  it('refuses a limit out of range and a cursor that does not continue the list, on both edges', async () => {
    const first = await listApprovals('limit=1');
    const oldestCursor = first.body.nextCursor as string;
    const garbage = Buffer.from('{"x":1}').toString('base64url');
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=many',
      'cursor=not!base64',
      `cursor=${garbage}`,
      `cursor=${'A'.repeat(513)}`,
      // A cursor of the oldest-first order does not continue the newest-first one.
      `order=newest&cursor=${oldestCursor}`,
    ]) {
      const refused = await listApprovals(query);
      expect({ query, status: refused.status, code: refused.body.error?.code }).toEqual({
        query,
        status: 400,
        code: 'invalid-request',
      });
    }
    for (const body of [
      { runId, limit: 0 },
      { runId, limit: '1' },
      { runId, cursor: garbage },
      { runId, order: 'newest', cursor: oldestCursor },
    ]) {
      expect(await overBus(ApiOperation.ListApprovals, body)).toMatchObject({
        ok: false,
        error: { code: 'invalid-request' },
      });
    }
  });

  it("pages a run's dispatches, and refuses another list's cursor for them", async () => {
    const run = await stack.http('GET', `/v1/runs/${runId}?limit=2`, TOKENS.acmeAgent);
    expect(run.status).toBe(200);
    const approvalsCursor = (await listApprovals('limit=1')).body.nextCursor as string;
    for (const query of ['limit=0', `cursor=${approvalsCursor}`, 'cursor=%2F%2F']) {
      const refused = await stack.http('GET', `/v1/runs/${runId}?${query}`, TOKENS.acmeAgent);
      expect({ query, status: refused.status, code: refused.body.error?.code }).toEqual({
        query,
        status: 400,
        code: 'invalid-request',
      });
    }
    expect(await overBus(ApiOperation.GetRun, { runId, cursor: approvalsCursor })).toMatchObject({
      ok: false,
      error: { code: 'invalid-request' },
    });
  });
});
