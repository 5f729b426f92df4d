import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  Client,
  ProtocolError,
  StreamableHTTPClientTransport,
  type CallToolResult,
} from '@modelcontextprotocol/client';
import { createRequestStateCodec } from '@modelcontextprotocol/server';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  countingTool,
  JOURNAL_AFTER_ALLOW,
  JOURNAL_WHILE_PARKED,
  resolve,
  unique,
  type CountingTool,
} from '../approvals/approval-helpers';
import { journalCounts, settled } from '../support/dispatch-probes';
import { serveHeldTool, type HeldTool } from '../support/remote-tool';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/** The stack's state key, so a test can seal a state the way a thief of the key would. */
const STATE_KEY = 'mcp-test-state-key-0123456789abcdef0123';
const MODERN = { pin: '2026-07-28' } as const;

type Era = 'modern' | 'legacy';

describe('Toolgate as an MCP server (/mcp, official SDK clients v2 and v1)', () => {
  let stack: TestStack;
  let gated: CountingTool;
  const open: { close(): Promise<void> }[] = [];

  /** An official v2 client on the given era, with the given token. */
  async function v2(
    era: Era,
    token: string = TOKENS.acmeAgent,
    gatewayUrl: string = stack.all.gateway.url,
  ): Promise<Client> {
    const client = new Client(
      { name: 'mcp-int', version: '1.0.0' },
      {
        versionNegotiation: { mode: era === 'modern' ? MODERN : 'legacy' },
        inputRequired: { autoFulfill: false },
      },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gatewayUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    open.push(client);
    return client;
  }

  /** The official v1 client (2025-11-25). */
  async function v1(token: string = TOKENS.acmeAgent): Promise<V1Client> {
    const client = new V1Client({ name: 'mcp-int-v1', version: '1.0.0' });
    await client.connect(
      new V1Transport(new URL(`${stack.all.gateway.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    open.push(client);
    return client;
  }

  /** A 2026-07-28 call that may pause: the raw result, `input_required` included. */
  function callRaw(
    client: Client,
    name: string,
    args: Record<string, unknown>,
    requestState?: string,
  ): Promise<Record<string, any>> {
    return client.callTool(
      { name, arguments: args, ...(requestState ? { requestState } : {}) } as never,
      { allowInputRequired: true } as never,
    ) as Promise<Record<string, any>>;
  }

  async function protocolError(p: Promise<unknown>): Promise<ProtocolError> {
    try {
      await p;
    } catch (err) {
      return err as ProtocolError;
    }
    throw new Error('expected a JSON-RPC error');
  }

  beforeAll(async () => {
    stack = await startTestStack('mcp', {
      GATEWAY_MCP_STATE_KEY: STATE_KEY,
      // A retry of a call nobody decided yet waits this long before pausing again.
      GATEWAY_MCP_APPROVAL_WAIT_MS: '300',
      GATEWAY_MCP_PROGRESS_INTERVAL_MS: '200',
    });
    await writeFile(path.join(stack.workdir, 'hello.txt'), 'hello over mcp\n');
    gated = await countingTool(stack, 'gated_deploy');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          ask: [{ id: 'gate-deploys', tool: 'gated_deploy', reason: 'deploys need a person' }],
          deny: [{ tool: 'write_file', reason: 'writes are frozen today' }],
        },
      },
    });
    expect(put.status).toBe(200);
  });
  afterAll(async () => {
    for (const c of open) await c.close().catch(() => undefined);
    gated?.stop();
    await stack?.stop();
  });

  describe('auth and origin', () => {
    it('answers 401 with a WWW-Authenticate naming the RFC 9728 metadata, which is served', async () => {
      const res = await fetch(`${stack.all.gateway.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(res.status).toBe(401);
      const challenge = res.headers.get('www-authenticate') ?? '';
      expect(challenge).toMatch(/^Bearer /);
      const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
      expect(metadataUrl).toBe(`${stack.all.gateway.url}/.well-known/oauth-protected-resource/mcp`);
      for (const url of [
        metadataUrl!,
        `${stack.all.gateway.url}/.well-known/oauth-protected-resource`,
      ]) {
        const meta = await fetch(url);
        expect(meta.status).toBe(200);
        expect(await meta.json()).toMatchObject({
          resource: `${stack.all.gateway.url}/mcp`,
          bearer_methods_supported: ['header'],
        });
      }
      const wrong = await fetch(`${stack.all.gateway.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: 'Bearer not-a-token-of-anyone',
          'content-type': 'application/json',
        },
        body: '{}',
      });
      expect(wrong.status).toBe(401);
    });

    it('refuses a token without the dispatch scope (403 insufficient_scope) and a foreign Origin (403)', async () => {
      const approverOnly = await fetch(`${stack.all.gateway.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.acmeApprover}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(approverOnly.status).toBe(403);
      expect(approverOnly.headers.get('www-authenticate')).toContain('insufficient_scope');
      const evil = await fetch(`${stack.all.gateway.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.acmeAgent}`,
          origin: 'https://evil.example',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(evil.status).toBe(403);
    });
  });

  describe.each<Era>(['modern', 'legacy'])('the v2 client (%s era)', (era) => {
    it("lists the tenant's toolset in name order with schemas and risk annotations", async () => {
      const client = await v2(era);
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      expect(names).toEqual([...names].sort());
      expect(names).toEqual(expect.arrayContaining(['gated_deploy', 'read_file', 'write_file']));
      const read = tools.find((t) => t.name === 'read_file')!;
      expect(read.annotations).toMatchObject({ readOnlyHint: true });
      expect(read.inputSchema).toMatchObject({
        type: 'object',
        properties: { path: expect.anything() },
      });
      expect(read.outputSchema).toMatchObject({
        type: 'object',
        required: expect.arrayContaining(['outcome']),
      });
      expect(tools.find((t) => t.name === 'write_file')!.annotations).toMatchObject({
        destructiveHint: true,
      });
      // Another tenant's tools are not listed.
      expect(
        (await (await v2(era, TOKENS.globexAdmin)).listTools()).tools.map((t) => t.name),
      ).not.toContain('gated_deploy');
    });

    it('calls a tool through the dispatch path: structured content matches the output schema', async () => {
      const client = await v2(era);
      const result = (await client.callTool({
        name: 'read_file',
        arguments: { path: 'hello.txt' },
      })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({
        outcome: 'ok',
        dispatchId: expect.any(String),
      });
      expect(JSON.stringify(result.structuredContent)).toContain('hello over mcp');
      const sc = result.structuredContent as { dispatchId: string };
      const history = await settled(stack, sc.dispatchId);
      expect(history.events.map((e) => e.event.type)).toEqual([
        'requested',
        'decided',
        'started',
        'settled',
      ]);
    });

    it('answers a deny as an error result carrying the reason, and bad input as typed errors', async () => {
      const client = await v2(era);
      const denied = (await client.callTool({
        name: 'write_file',
        arguments: { path: 'x.txt', content: 'x' },
      })) as CallToolResult;
      expect(denied.isError).toBe(true);
      expect(JSON.stringify(denied.content)).toContain('writes are frozen today');
      expect(denied.structuredContent).toMatchObject({
        outcome: 'denied',
        error: { code: 'denied' },
      });
      const invalid = (await client.callTool({
        name: 'read_file',
        arguments: { path: 42 },
      })) as CallToolResult;
      expect(invalid.isError).toBe(true);
      expect(invalid.structuredContent).toMatchObject({ error: { code: 'invalid-arguments' } });
      const unknown = await protocolError(client.callTool({ name: 'no_such_tool', arguments: {} }));
      expect(unknown.code).toBe(-32602);
      const badRun = await protocolError(
        client.callTool({
          name: 'read_file',
          arguments: { path: 'hello.txt' },
          _meta: { 'io.toolgate/runId': 'not.a.token' },
        }),
      );
      expect(badRun.code).toBe(-32602);
      expect((badRun.data as { code: string }).code).toBe('invalid-request');
      // An id that is not a string is refused, not replaced by a fresh one (which would run the
      // tool again on every retry the client meant as a replay).
      for (const key of ['io.toolgate/runId', 'io.toolgate/callId']) {
        const notText = await protocolError(
          client.callTool({
            name: 'read_file',
            arguments: { path: 'hello.txt' },
            _meta: { [key]: 42 },
          }),
        );
        expect(notText.code).toBe(-32602);
        expect(notText.data).toMatchObject({ code: 'invalid-request', details: { key } });
      }
    });
  });

  it('the v1 client (2025-11-25) lists and calls gated tools', async () => {
    const client = await v1();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['gated_deploy', 'read_file']));
    const result = await client.callTool({ name: 'read_file', arguments: { path: 'hello.txt' } });
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.structuredContent)).toContain('hello over mcp');
  });

  describe('an ask is the protocol pause, never a bypass', () => {
    it('2026-07-28: input_required with a sealed state; the retry after the allow runs the tool once; a replay is refused', async () => {
      const client = await v2('modern');
      const n = unique('n');
      const paused = await callRaw(client, 'gated_deploy', { n });
      expect(paused.resultType).toBe('input_required');
      expect(typeof paused.requestState).toBe('string');
      const pending = paused._meta['io.toolgate/pending'];
      expect(pending).toMatchObject({
        state: 'suspended',
        approval: { key: expect.stringMatching(/^[0-9a-f]{64}$/) },
      });
      expect(gated.runsOf(n)).toBe(0);

      // Retrying before anyone decided pauses again with a fresh state: nothing runs.
      const again = await callRaw(client, 'gated_deploy', { n }, paused.requestState);
      expect(again.resultType).toBe('input_required');
      expect(again.requestState).not.toBe(paused.requestState);
      expect(gated.runsOf(n)).toBe(0);

      const allowed = await resolve(stack, pending.approval.key, {
        decision: 'allow',
        dispatchId: pending.dispatchId,
        runId: pending.runId,
      });
      expect(allowed.status).toBe(200);
      const done = await callRaw(client, 'gated_deploy', { n }, again.requestState);
      expect(done.isError).toBeFalsy();
      expect(done.structuredContent).toMatchObject({
        outcome: 'ok',
        dispatchId: pending.dispatchId,
      });
      expect(gated.runsOf(n)).toBe(1);

      // Each state is good once, on any replica: the first, the second, both refused now.
      for (const used of [paused.requestState, again.requestState]) {
        const replay = await protocolError(callRaw(client, 'gated_deploy', { n }, used));
        expect(replay.code).toBe(-32602);
      }
      expect(gated.runsOf(n)).toBe(1);
      expect(await journalCounts(stack, 'acme', pending.runId, pending.dispatchId)).toEqual(
        JOURNAL_AFTER_ALLOW,
      );
    });

    it('a state is used once across gateway replicas: refused on the other after a use, and only one of two racing uses wins', async () => {
      const { startGateway } = await import('@toolgate/gateway');
      const second = await startGateway({
        config: { ...stack.options.gateway, port: 0 },
        logger: false,
      });
      try {
        const here = await v2('modern');
        const there = await v2('modern', TOKENS.acmeAgent, second.url);
        const n = unique('n');
        const paused = await callRaw(here, 'gated_deploy', { n });
        // Used on the second replica (still parked: it pauses again, with a new state) ...
        const again = await callRaw(there, 'gated_deploy', { n }, paused.requestState);
        expect(again.resultType).toBe('input_required');
        // ... then replayed on the first: refused.
        const replay = await protocolError(
          callRaw(here, 'gated_deploy', { n }, paused.requestState),
        );
        expect(replay.code).toBe(-32602);
        expect(replay.data).toMatchObject({ reason: 'replayed' });
        // The same state sent to both replicas at once: exactly one use is accepted.
        const raced = await Promise.allSettled([
          callRaw(here, 'gated_deploy', { n }, again.requestState),
          callRaw(there, 'gated_deploy', { n }, again.requestState),
        ]);
        const won = raced.filter((r) => r.status === 'fulfilled');
        const lost = raced.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect((won[0] as PromiseFulfilledResult<Record<string, any>>).value.resultType).toBe(
          'input_required',
        );
        expect(lost).toHaveLength(1);
        expect((lost[0] as PromiseRejectedResult).reason).toMatchObject({
          code: -32602,
          data: { reason: 'replayed' },
        });
        expect(gated.runsOf(n)).toBe(0);
      } finally {
        await second.stop();
      }
    });

    it('refuses a tampered state, a state for other arguments, and another principal’s state; none runs the tool', async () => {
      const client = await v2('modern');
      const n = unique('n');
      const paused = await callRaw(client, 'gated_deploy', { n });
      const state = paused.requestState as string;
      // One character of the sealed value changed (never to itself).
      const at = state.length - 2;
      const flipped = state.slice(0, at) + (state[at] === 'A' ? 'B' : 'A') + state.slice(at + 1);
      const tampered = await protocolError(callRaw(client, 'gated_deploy', { n }, flipped));
      expect(tampered.code).toBe(-32602);
      const otherArgs = await protocolError(
        callRaw(client, 'gated_deploy', { n: unique('n') }, state),
      );
      expect(otherArgs.code).toBe(-32602);
      // Same tenant, another identity: the state is bound to the principal it was minted for.
      const admin = await v2('modern', TOKENS.acmeAdmin);
      const stolen = await protocolError(callRaw(admin, 'gated_deploy', { n }, state));
      expect(stolen.code).toBe(-32602);
      // The state is still good for its own principal (refusals did not consume it), and still parked.
      const own = await callRaw(client, 'gated_deploy', { n }, state);
      expect(own.resultType).toBe('input_required');
      expect(gated.runsOf(n)).toBe(0);
      const pending = paused._meta['io.toolgate/pending'];
      expect(await journalCounts(stack, 'acme', pending.runId, pending.dispatchId)).toEqual(
        JOURNAL_WHILE_PARKED,
      );
    });

    it('even a state sealed with the stolen key reaches no tool: the journal, not the state, says whether it may run; an expired one is refused', async () => {
      const client = await v2('modern');
      const n = unique('n');
      const paused = await callRaw(client, 'gated_deploy', { n });
      const pending = paused._meta['io.toolgate/pending'];
      // A thief with the gateway's key seals a state for the parked dispatch, claiming whatever it likes.
      const thief = createRequestStateCodec<Record<string, unknown>>({
        key: STATE_KEY,
        ttlSeconds: 60,
        bind: (ctx) =>
          `${String(ctx.http?.authInfo?.extra?.tenant)}\0${ctx.http?.authInfo?.clientId}`,
      });
      const ctx = {
        http: { authInfo: { extra: { tenant: 'acme' }, clientId: 'acme-agent' } },
      } as never;
      const forged = await thief.mint(
        {
          v: 1,
          runId: pending.runId,
          callId: pending.callId,
          dispatchId: pending.dispatchId,
          tool: 'gated_deploy',
          digest: (await import('@toolgate/gateway')).mcpCallDigest('gated_deploy', { n }),
          nonce: '00000000-0000-4000-8000-000000000001',
          approved: true,
        },
        ctx,
      );
      const still = await callRaw(client, 'gated_deploy', { n }, forged);
      expect(still.resultType).toBe('input_required');
      expect(gated.runsOf(n)).toBe(0);
      const short = createRequestStateCodec<Record<string, unknown>>({
        key: STATE_KEY,
        ttlSeconds: 1,
        bind: (c) => `${String(c.http?.authInfo?.extra?.tenant)}\0${c.http?.authInfo?.clientId}`,
      });
      const expiring = await short.mint(
        { ...pending, v: 1, tool: 'gated_deploy', nonce: '00000000-0000-4000-8000-000000000002' },
        ctx,
      );
      await new Promise((r) => setTimeout(r, 2100));
      const expired = await protocolError(callRaw(client, 'gated_deploy', { n }, expiring));
      expect(expired.code).toBe(-32602);
      expect(gated.runsOf(n)).toBe(0);
      expect(await journalCounts(stack, 'acme', pending.runId, pending.dispatchId)).toEqual(
        JOURNAL_WHILE_PARKED,
      );
    });

    it('2025-11-25 (v1 client): an error result names the approval; the same call after the allow collects the outcome, run once', async () => {
      const client = await v1();
      const n = unique('n');
      const parked = await client.callTool({ name: 'gated_deploy', arguments: { n } });
      expect(parked.isError).toBe(true);
      const sc = parked.structuredContent as {
        outcome: string;
        runId: string;
        callId: string;
        dispatchId: string;
        approval: { key: string };
      };
      expect(sc.outcome).toBe('suspended');
      expect(JSON.stringify(parked.content)).toContain(sc.approval.key);
      expect(gated.runsOf(n)).toBe(0);
      // The same call again before a decision is still parked: it is the same dispatch.
      const meta = { 'io.toolgate/runId': sc.runId, 'io.toolgate/callId': sc.callId };
      const early = await client.callTool({ name: 'gated_deploy', arguments: { n }, _meta: meta });
      expect(early.structuredContent).toMatchObject({
        outcome: 'suspended',
        dispatchId: sc.dispatchId,
      });
      expect(
        (
          await resolve(stack, sc.approval.key, {
            decision: 'allow',
            dispatchId: sc.dispatchId,
            runId: sc.runId,
          })
        ).status,
      ).toBe(200);
      const done = await client.callTool({ name: 'gated_deploy', arguments: { n }, _meta: meta });
      expect(done.isError).toBeFalsy();
      expect(done.structuredContent).toMatchObject({ outcome: 'ok', dispatchId: sc.dispatchId });
      const replay = await client.callTool({ name: 'gated_deploy', arguments: { n }, _meta: meta });
      expect(replay.structuredContent).toMatchObject({ outcome: 'ok', dispatchId: sc.dispatchId });
      expect(gated.runsOf(n)).toBe(1);
    });

    it('a denial of a parked call is an error result with the reason on the retry', async () => {
      const client = await v2('modern');
      const n = unique('n');
      const paused = await callRaw(client, 'gated_deploy', { n });
      const pending = paused._meta['io.toolgate/pending'];
      await resolve(stack, pending.approval.key, {
        decision: 'deny',
        reason: 'not during the freeze',
        dispatchId: pending.dispatchId,
        runId: pending.runId,
      });
      const done = await callRaw(client, 'gated_deploy', { n }, paused.requestState);
      expect(done.isError).toBe(true);
      expect(JSON.stringify(done.content)).toContain('not during the freeze');
      expect(gated.runsOf(n)).toBe(0);
    });
  });

  describe('cancellation', () => {
    let held: HeldTool;
    beforeAll(async () => {
      held = await serveHeldTool(
        stack,
        'slow_job',
        { finished: true },
        {
          type: 'object',
          properties: { n: { type: 'string' } },
        },
      );
    });
    afterAll(() => {
      held?.release();
      held?.stop();
    });

    /** The dispatch of `runId` once it has `started` (its executor claimed and runs it). */
    async function startedIn(runId: string): Promise<string> {
      return eventually(
        async () => {
          const info = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
            subjects_filter: stack.nats.subjects.journal.forRun('acme', runId),
          });
          const started = Object.keys(info.state.subjects ?? {}).find((s) =>
            s.endsWith('.started'),
          );
          return started?.split('.').at(-2);
        },
        { what: `a started dispatch in ${runId}` },
      );
    }

    it('closing the request aborts the running dispatch: it settles cancelled while its worker never answered', async () => {
      const client = await v2('modern');
      const runId = unique('run');
      const aborter = new AbortController();
      const call = client
        .callTool(
          {
            name: 'slow_job',
            arguments: { n: unique('n') },
            _meta: { 'io.toolgate/runId': runId },
          },
          { signal: aborter.signal },
        )
        .catch((err: unknown) => err);
      const dispatchId = await startedIn(runId);
      aborter.abort();
      await call;
      const view = await settled(stack, dispatchId);
      expect(view.dispatch).toMatchObject({ outcome: 'error', error: { code: 'cancelled' } });
    });

    it('a long call reports progress while it runs, then its result', async () => {
      const slow = await serveHeldTool(stack, 'slow_progress', { done: true });
      try {
        const client = await v2('modern');
        const seen: number[] = [];
        const result = await client.callTool(
          { name: 'slow_progress', arguments: {} },
          {
            onprogress: (p) => {
              seen.push(p.progress);
              // Held until the client has heard it still runs: no progress, no result.
              slow.release();
            },
          },
        );
        expect(seen.length).toBeGreaterThan(0);
        expect(result.structuredContent).toMatchObject({ outcome: 'ok', result: { done: true } });
      } finally {
        slow.stop();
      }
    });

    it('a cancellation not signed by the gateway stops nothing', async () => {
      const runId = unique('run');
      const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId,
        callId: 'c1',
        agent: { agentType: 'forger' },
        tool: 'slow_job',
        input: { n: unique('n') },
      });
      expect(res.status).toBe(202);
      const dispatchId = await startedIn(runId);
      const forged = JSON.stringify({ tenant: 'acme', runId, dispatchId, reason: 'forged' });
      stack.nats.nc.publish(stack.nats.subjects.cancelDispatch, forged);
      await stack.nats.nc.flush();
      held.release();
      const view = await settled(stack, dispatchId);
      expect(view.dispatch).toMatchObject({ outcome: 'ok', result: { finished: true } });
    });
  });
});
