import { headers as natsHeaders } from '@nats-io/transport-node';
import {
  ApiOperation,
  DISPATCH_REPLY_BUDGET_BYTES,
  DISPATCH_VALUE_CHUNK_CHARS,
} from '@toolgate/contracts';
import { createClient } from '@toolgate/sdk';
import { eventually, NATS_URL } from '@toolgate/testing';
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
  const overBus = async (
    operation: ApiOperation,
    body: unknown,
    token: string = TOKENS.acmeApprover,
  ) => {
    const raw = await overBusRaw(operation, body, token);
    return JSON.parse(raw) as { ok: boolean; data?: any; error?: { code: string } };
  };
  /** The reply's JSON text, to measure it. */
  const overBusRaw = async (operation: ApiOperation, body: unknown, token: string) => {
    const h = natsHeaders();
    h.set('Authorization', `Bearer ${token}`);
    const reply = await stack.nats.nc.request(
      stack.nats.subjects.api(operation),
      JSON.stringify(body),
      { headers: h, timeout: 10_000 },
    );
    return new TextDecoder().decode(reply.data);
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

  it('answers dispatch.get for a call of ~1 MB submitted over the bus within its budget, the whole input one chunked read away', async () => {
    const runId = unique('run-huge');
    // Characters that JSON escapes or UTF-8 widens, so chunk offsets are not byte offsets.
    const input = { n: `${unique('n')}-"é😀\\-${'z'.repeat(1_000_000)}` };
    const submitted = await overBus(
      ApiOperation.SubmitDispatch,
      { runId, callId: 'huge', agent: { agentType: 'coder' }, tool: 'gated', input },
      TOKENS.acmeAgent,
    );
    expect(submitted).toMatchObject({ ok: true, data: { status: 'accepted' } });
    const dispatchId = submitted.data.dispatchId as string;

    // Parked: its input and its post-hook input are both ~1 MB, in the dispatch and its events.
    const raw = await eventually(
      async () => {
        const text = await overBusRaw(
          ApiOperation.GetDispatch,
          { dispatchId },
          TOKENS.acmeApprover,
        );
        const data = JSON.parse(text).data;
        // Parked, with its request and each of its events folded: a redelivered event (a fold
        // that failed under load) folds after the call's later ones — the row parked without its
        // input, or the history without its `decided` — until then.
        const types = new Set(
          (data?.events ?? []).map((e: { event: { type: string } }) => e.event.type),
        );
        return data?.dispatch?.status === 'suspended' &&
          data.dispatch.input !== undefined &&
          ['requested', 'decided', 'suspended'].every((t) => types.has(t))
          ? text
          : undefined;
      },
      { timeoutMs: 30_000, what: 'the huge call parked, its request and events folded' },
    );
    expect(Buffer.byteLength(raw)).toBeLessThan(DISPATCH_REPLY_BUDGET_BYTES + 4096);
    const got = JSON.parse(raw).data;
    expect([...got.elided].sort()).toEqual(['effectiveInput', 'input']);
    const inputJson = JSON.stringify(input);
    for (const value of [got.dispatch.input, got.dispatch.effectiveInput]) {
      expect(value).toEqual({
        kind: 'elided',
        preview: {
          json: inputJson.slice(0, 512),
          truncated: true,
          bytes: Buffer.byteLength(inputJson),
          summary: null,
        },
      });
    }
    const byType = Object.fromEntries(
      got.events.map((e: { event: { type: string } }) => [e.event.type, e.event]),
    );
    expect(byType.requested.input.kind).toBe('elided');
    expect(byType.suspended.input.kind).toBe('elided');
    expect(byType.decided.input.kind).toBe('elided');

    // The whole input, chunk by chunk over the bus: each reply bounded, together the value.
    let text = '';
    let offset: number | null = 0;
    let chunks = 0;
    while (offset !== null) {
      const chunkRaw = await overBusRaw(
        ApiOperation.GetDispatchValue,
        { dispatchId, part: 'input', offset },
        TOKENS.acmeApprover,
      );
      expect(Buffer.byteLength(chunkRaw)).toBeLessThan(DISPATCH_REPLY_BUDGET_BYTES + 4096);
      const chunk = JSON.parse(chunkRaw);
      expect(chunk).toMatchObject({ ok: true, data: { dispatchId, part: 'input', offset } });
      text += chunk.data.text;
      offset = chunk.data.nextOffset;
      chunks++;
    }
    expect(chunks).toBeGreaterThanOrEqual(Math.ceil(1_000_000 / DISPATCH_VALUE_CHUNK_CHARS));
    expect(JSON.parse(text)).toEqual(input);
    // The SDK reads it whole the same way.
    const client = await createClient({
      servers: NATS_URL,
      prefix: stack.nats.prefix,
      token: TOKENS.acmeApprover,
      tenant: 'acme',
    });
    try {
      expect(await client.getDispatchValue(dispatchId, 'effectiveInput')).toEqual(input);
    } finally {
      await client.close();
    }

    // approvals.get over the bus: the approver's view of the same call, bounded alike — the input
    // as its preview, named in `elided`; the whole of it is the SDK's read above (post-hook input).
    const approvalKey = JSON.parse(raw).data.events.find(
      (e: { event: { type: string } }) => e.event.type === 'suspended',
    ).event.approvalKey as string;
    const approvalRaw = await overBusRaw(
      ApiOperation.GetApproval,
      { key: approvalKey, dispatchId, runId },
      TOKENS.acmeApprover,
    );
    expect(Buffer.byteLength(approvalRaw)).toBeLessThan(DISPATCH_REPLY_BUDGET_BYTES + 4096);
    const approval = JSON.parse(approvalRaw);
    expect(approval).toMatchObject({
      ok: true,
      data: {
        approval: { dispatchId, input: { kind: 'elided', preview: { truncated: true } } },
        elided: ['effectiveInput'],
        shellElided: false,
      },
    });

    // HTTP serves the same chunks; another tenant's token sees no such dispatch.
    const first = await stack.http(
      'GET',
      `/v1/dispatches/${dispatchId}/values/effectiveInput?offset=0`,
      TOKENS.acmeApprover,
    );
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ offset: 0, nextOffset: DISPATCH_VALUE_CHUNK_CHARS });
    expect(text.startsWith(first.body.text)).toBe(true);
    const bad = await stack.http(
      'GET',
      `/v1/dispatches/${dispatchId}/values/secrets?offset=0`,
      TOKENS.acmeApprover,
    );
    expect({ status: bad.status, code: bad.body.error?.code }).toEqual({
      status: 400,
      code: 'invalid-request',
    });
    expect(
      await overBus(
        ApiOperation.GetDispatchValue,
        { dispatchId, part: 'input' },
        TOKENS.globexAdmin,
      ),
    ).toMatchObject({ ok: false, error: { code: 'not-found' } });

    // A call that fits is answered whole, nothing elided.
    const small = await stack.http(
      'GET',
      `/v1/dispatches/${parked[0]!.dispatchId}`,
      TOKENS.acmeApprover,
    );
    expect(small.status).toBe(200);
    expect(small.body.elided).toEqual([]);
    expect(small.body.dispatch.input).toEqual(parked[0]!.input);
  }, 120_000);
});
