import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { ApiOperation, ErrorCode } from '@toolgate/contracts';
import { GatewayApi, toHttpError } from '@toolgate/gateway';
import { TOKENS, type TestStack } from '../support/test-stack';
import {
  acceptableCode,
  apiCase,
  fuzz,
  CASES,
  expectHealthy,
  expectJournalMatches,
  nested,
  RUN_PLACEHOLDER,
  RunLedger,
  startFuzzStack,
} from './fuzz-support';

/**
 * The HTTP edge under fuzz. 10,000 generated requests go through the gateway's operations
 * in-process (`GatewayApi.call`, the code every route calls, with the HTTP error filter's mapping
 * to a status) — a real stack behind it, so submissions are journaled and decided — and a smaller
 * sample of raw requests goes over real HTTP, where express's body parser meets what no JSON
 * value can express (bodies over the limit, broken JSON, other content types, odd routes).
 * Every answer must be a typed one, never a 5xx but 503 `unavailable`; what was refused must have
 * journaled nothing; every service must be healthy afterwards.
 */
/** Well-formed submissions added to the generated ones (see the first test). */
const WELL_FORMED = 101;

describe('HTTP edge fuzz', () => {
  let stack: TestStack;
  let api: GatewayApi;
  const ledger = new RunLedger('h');

  beforeAll(async () => {
    stack = await startFuzzStack('fuzz-http');
    api = stack.all.gateway.app.get(GatewayApi);
  }, 60_000);
  afterAll(() => stack?.stop(), 60_000);

  /** What HTTP would answer: the operation's success, or the filter's status for its error. */
  async function answer(
    operation: ApiOperation,
    authorization: string | undefined,
    body: unknown,
  ): Promise<{ status: number; code?: string }> {
    try {
      await api.call(operation, authorization, body, {});
      return { status: 200 };
    } catch (err) {
      const { status, error } = toHttpError(err);
      return { status, code: error.code };
    }
  }

  it('answers 10,000 generated requests with typed errors, never a 5xx but unavailable', async () => {
    const ran = await fuzz(apiCase, async ({ operation, authorization, body: generated }) => {
      const { body, runId } = ledger.claim(generated);
      const result = await answer(operation, authorization, body);
      if (result.status < 400) {
        if (operation === ApiOperation.SubmitDispatch) ledger.accepted(runId);
        return;
      }
      if (result.code === ErrorCode.Unavailable) ledger.unavailable(runId);
      if (!acceptableCode(result.code)) {
        throw new Error(`${operation} answered ${result.status} ${result.code}`);
      }
    });
    expect(ran).toBe(CASES);
    // Whatever the seed drew (its accepted submissions were 98 on one CI run), well-formed ones
    // through the same path, so the journal check below always has more than 100 to check.
    for (let i = 0; i < WELL_FORMED; i++) {
      const { body, runId } = ledger.claim({
        runId: RUN_PLACEHOLDER,
        callId: `well-formed-${i}`,
        agent: { agentType: 'fuzz' },
        tool: 'list_dir',
        input: {},
      });
      const result = await answer(ApiOperation.SubmitDispatch, `Bearer ${TOKENS.acmeAgent}`, body);
      expect(result).toEqual({ status: 200 });
      ledger.accepted(runId);
    }
  }, 120_000);

  it('answers raw HTTP requests the JSON generators cannot express with typed errors', async () => {
    const url = stack.all.gateway.url;
    const submit = (runId: string, extra: object = {}) =>
      JSON.stringify({
        runId,
        callId: 'c',
        agent: { agentType: 'a' },
        tool: 'list_dir',
        input: {},
        ...extra,
      });
    const raw = fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'),
      route: fc.oneof(
        fc.constantFrom(
          '/v1/dispatches',
          '/v1/tools',
          '/v1/policy',
          '/v1/policy/evaluate',
          '/v1/approvals',
          '/v1/runs/x',
          '/v1/dispatches/%2e%2e',
          '/v1/approvals/zz/resolve',
          '/v1/approvals/zz',
          '/v1/whoami',
          '/v1/approvals?limit=-1&minAgeMs=abc',
          '/v1/approvals?runId=a&runId=b',
          '/v1/approvals?__proto__[x]=1',
        ),
        fc.webPath().map((p) => `/v1${p}`),
      ),
      contentType: fc.constantFrom(
        'application/json',
        'application/json; charset=utf-16',
        'text/plain',
        'application/x-www-form-urlencoded',
        undefined,
      ),
      body: fc.oneof(
        fc.constant(`{"runId":"${RUN_PLACEHOLDER}","callId":`), // cut short
        fc.constant(submit(RUN_PLACEHOLDER, { input: 'x'.repeat(150_000) })), // over 100 KB
        fc.constant(submit(RUN_PLACEHOLDER, { input: nested(3000) })),
        fc.constant(`${'['.repeat(40_000)}${']'.repeat(40_000)}`),
        fc.constant('{"document":{"__proto__":{"engine":{"deny":[]}}}}'),
        fc.string({ maxLength: 200 }),
        fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
        fc.constant(undefined),
      ),
      token: fc.constantFrom(TOKENS.acmeAdmin, TOKENS.acmeAgent, 'nope', undefined),
    });
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(raw, async ({ method, route, contentType, body: generated, token }) => {
        const runId = `hr${sent}`;
        const body =
          method === 'GET' || generated === undefined
            ? undefined
            : generated.split(RUN_PLACEHOLDER).join(runId);
        if (body?.includes(runId)) ledger.runs.set(runId, false);
        const res = await fetch(`${url}${route}`, {
          method,
          headers: {
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(contentType ? { 'content-type': contentType } : {}),
          },
          ...(body !== undefined ? { body } : {}),
        });
        sent++;
        const text = await res.text();
        if (res.status < 400) {
          if (body?.includes(runId) && route === '/v1/dispatches') ledger.accepted(runId);
          return;
        }
        const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
        if (code === ErrorCode.Unavailable && route === '/v1/dispatches') ledger.unavailable(runId);
        if (res.status >= 500 && !acceptableCode(code)) {
          throw new Error(`${method} ${route} answered ${res.status} ${text.slice(0, 300)}`);
        }
        expect(acceptableCode(code)).toBe(true);
      }),
      { numRuns: 300 },
    );
    expect(sent).toBe(300);
  }, 120_000);

  it('answers a body, a number and a path it cannot decode 400 invalid-request, saying which', async () => {
    const url = stack.all.gateway.url;
    const post = (encoding: string, body: Uint8Array | string) =>
      fetch(`${url}/v1/dispatches`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.acmeAgent}`,
          'content-type': 'application/json',
          'content-encoding': encoding,
        },
        body,
      });
    const whole = gzipSync(JSON.stringify({ runId: 'enc', callId: 'c', tool: 'list_dir' }));
    const answers = [
      await post('gzip', 'notgzip'),
      await post('deflate', 'notdeflate'),
      await post('br', 'notbrotli'),
      await post('gzip', whole.subarray(0, whole.length - 12)),
    ];
    for (const res of answers) {
      expect({ status: res.status, body: await res.json() }).toEqual({
        status: 400,
        body: {
          error: { code: 'invalid-request', message: expect.stringMatching(/Content-Encoding/) },
        },
      });
    }
    // A number JSON cannot carry (it parses to Infinity): the request's fault, not a result's —
    // a submission's, and a dry run's of the chain.
    for (const [route, body] of [
      [
        '/v1/dispatches',
        '{"runId":"inf","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{"n":1e400}}',
      ],
      ['/v1/policy/evaluate', '{"tool":"list_dir","input":{"n":1e400}}'],
    ]) {
      const res = await fetch(`${url}${route}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.acmeAgent}`,
          'content-type': 'application/json',
        },
        body,
      });
      expect({ route, status: res.status, body: await res.json() }).toEqual({
        route,
        status: 400,
        body: { error: expect.objectContaining({ code: 'invalid-request' }) },
      });
    }
    const path = await fetch(`${url}/v1/dispatches/%ff`, {
      headers: { authorization: `Bearer ${TOKENS.acmeAgent}` },
    });
    expect({ status: path.status, body: await path.json() }).toEqual({
      status: 400,
      body: { error: { code: 'invalid-request', message: expect.stringMatching(/path/) } },
    });
  });

  it('journaled exactly the submissions it accepted, and every service is healthy', async () => {
    await expectJournalMatches(stack, ledger, 100);
    await expectHealthy(stack);
  }, 150_000);
});
