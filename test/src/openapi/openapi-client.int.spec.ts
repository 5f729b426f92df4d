import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import createClient from 'openapi-fetch';
import { HTTP_ROUTES, type HttpRouteName } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import type { paths } from './generated/gateway-api';

/**
 * A client generated from the OpenAPI document (`openapi-typescript` types, `openapi-fetch`) makes
 * typed calls against a running gateway: the paths, bodies and answers it compiles against are the
 * ones the gateway serves. Every answer is also parsed with its route's response schema, so the
 * schemas the document publishes are true of what the gateway sends.
 */

let stack: TestStack;
const clientFor = (token: string) =>
  createClient<paths>({
    baseUrl: stack.all.gateway.url,
    headers: { authorization: `Bearer ${token}` },
  });

/** The answer parsed with the route's own schema: it throws where the document would lie. */
function conforms<T>(name: HttpRouteName, data: T): T {
  const schema = HTTP_ROUTES[name] as { response?: { parse(v: unknown): unknown } };
  schema.response!.parse(data);
  return data;
}

beforeAll(async () => {
  stack = await startTestStack('openapi-client');
  await writeFile(path.join(stack.workdir, 'hello.txt'), 'hello, openapi\n');
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

it('reads who it is, the tools and the policy, and puts a policy, all typed', async () => {
  const admin = clientFor(TOKENS.acmeAdmin);

  const who = await admin.GET('/v1/whoami');
  expect(conforms('whoAmI', who.data!)).toMatchObject({ tenant: 'acme', identity: 'acme-admin' });
  const scopes: ('dispatch' | 'approve' | 'admin')[] = who.data!.scopes;
  expect(scopes).toContain('admin');

  const tools = await admin.GET('/v1/tools');
  const names: string[] = conforms('listTools', tools.data!).tools.map((t) => t.name);
  expect(names).toContain('read_file');

  const put = await admin.PUT('/v1/policy', {
    body: { document: { engine: { ask: [{ tool: 'list_dir', reason: 'look first' }] } } },
  });
  expect(put.response.status).toBe(200);
  const revision: number = conforms('putPolicy', put.data!).revision;
  expect(revision).toBeGreaterThan(0);

  const policy = await admin.GET('/v1/policy');
  expect(conforms('getPolicy', policy.data!)).toMatchObject({
    revision,
    document: { engine: { ask: [{ tool: 'list_dir' }] } },
  });

  const verdict = await admin.POST('/v1/policy/evaluate', {
    body: { tool: 'list_dir', input: { path: '.' } },
  });
  expect(conforms('evaluatePolicy', verdict.data!)).toMatchObject({
    verdict: 'ask',
    policyRevision: revision,
  });
});

it('submits a call, waits for it, and reads it back with its run and its approvals', async () => {
  const agent = clientFor(TOKENS.acmeAgent);
  const submitted = await agent.POST('/v1/dispatches', {
    body: {
      runId: 'openapi-run',
      callId: 'call-1',
      agent: { agentType: 'openapi-client' },
      tool: 'read_file',
      input: { path: 'hello.txt' },
      wait: 15_000,
    },
  });
  expect(submitted.response.status).toBe(200);
  const settled = conforms('submitDispatch', submitted.data!);
  expect(settled.settled?.outcome).toBe('ok');
  expect(JSON.stringify(settled.settled?.result)).toContain('hello, openapi');

  // Reads follow the journal's projection a moment later (docs/bus-protocol.md).
  const dispatch = await eventually(
    async () => {
      const r = await agent.GET('/v1/dispatches/{dispatchId}', {
        params: { path: { dispatchId: settled.dispatchId } },
      });
      return r.data?.dispatch.status === 'settled' ? r.data : undefined;
    },
    { what: 'the dispatch to be read settled', timeoutMs: 20_000 },
  );
  conforms('getDispatch', dispatch);
  expect(dispatch.events.map((e) => e.event.type)).toEqual(
    expect.arrayContaining(['requested', 'decided', 'settled']),
  );

  // The recorded outcome, read from the stream (`wait` in the query, as a number).
  const awaited = await agent.GET('/v1/runs/{runId}/dispatches/{dispatchId}/outcome', {
    params: { path: { runId: 'openapi-run', dispatchId: settled.dispatchId }, query: { wait: 50 } },
  });
  expect(conforms('awaitDispatch', awaited.data!)).toEqual({
    dispatchId: settled.dispatchId,
    state: 'settled',
    settled: settled.settled,
  });

  const run = await agent.GET('/v1/runs/{runId}', {
    params: { path: { runId: 'openapi-run' }, query: { limit: 10 } },
  });
  expect(conforms('getRun', run.data!)).toMatchObject({ runId: 'openapi-run', dispatchCount: 1 });

  const approvals = await agent.GET('/v1/approvals', { params: { query: { status: 'all' } } });
  expect(Array.isArray(conforms('listApprovals', approvals.data!).approvals)).toBe(true);
});

it('gets typed errors with the statuses the document lists', async () => {
  const agent = clientFor(TOKENS.acmeAgent);
  const missing = await agent.GET('/v1/dispatches/{dispatchId}', {
    params: { path: { dispatchId: 'no-such-dispatch' } },
  });
  expect(missing.response.status).toBe(404);
  expect(missing.error?.error.code).toBe('not-found');

  const forbidden = await agent.PUT('/v1/policy', { body: { document: {} } });
  expect(forbidden.response.status).toBe(403);
  expect(forbidden.error?.error.code).toBe('forbidden');

  const anonymous = createClient<paths>({ baseUrl: stack.all.gateway.url });
  const refused = await anonymous.GET('/v1/whoami');
  expect(refused.response.status).toBe(401);
  expect(refused.error?.error.code).toBe('unauthorized');
});
