/**
 * A script's `http_get` runs the `http_fetch` builtin, whose connections (each resolved address,
 * each redirect hop) pass the domain rules. Those of `http_fetch` itself, and of its risk, hold for
 * a script as for a direct call: a red team's script followed a redirect to a loopback service
 * that a rule scoped to `http_fetch` (and one scoped to risk `network`) denied, because only the
 * script's own name and risk were checked after the first URL.
 */
import { recordingListener, type RecordingListener } from '@toolgate/testing';
import { dispatchRequests } from '../support/dispatch-requests';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const call = dispatchRequests('run-script-fetch', 'scriptfetch', 15_000);

describe("a script's http_get against the domain rules of http_fetch", () => {
  let stack: TestStack;
  // Services on loopback addresses the rules deny; a redirector on one they allow.
  let byTool: RecordingListener;
  let byRisk: RecordingListener;
  let redirector: RecordingListener;

  beforeAll(async () => {
    byTool = await recordingListener('127.0.0.1', (_req, res) => res.end('SECRET OF 127.0.0.1'));
    byRisk = await recordingListener('127.0.0.3', (_req, res) => res.end('SECRET OF 127.0.0.3'));
    redirector = await recordingListener('127.0.0.2', (req, res) => {
      const to =
        req.url === '/to-tool-rule'
          ? `http://127.0.0.1:${byTool.port}/redirected`
          : req.url === '/to-risk-rule'
            ? `http://127.0.0.3:${byRisk.port}/redirected`
            : undefined;
      if (to) res.writeHead(302, { location: to }).end();
      else res.end('fine');
    });
    // The listeners are on loopback, which the executor reaches only when told to.
    stack = await startTestStack('scriptfetch', { EXECUTOR_FETCH_INTERNAL: '127.0.0.0/8' });
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          deny: [
            { tool: 'http_fetch', domains: ['127.0.0.1'], reason: 'not that one' },
            { risk: 'network', domains: ['127.0.0.3'], reason: 'nor that one' },
          ],
        },
      },
    });
    expect(put.status).toBe(200);
    // Also a writer: its own risk is not `network`.
    const installed = await stack.http('PUT', '/v1/tools/scripts/getter', TOKENS.acmeAdmin, {
      source: [
        '// @tool getter',
        '// @description fetches a URL',
        '// @param url string required "u"',
        '// @requires http_get, write_file',
        'try { const r = await http_get(params.url); return { ok: true, body: r.body }; }',
        'catch (e) { return { ok: false, code: e.code }; }',
      ].join('\n'),
    });
    expect(installed.status).toBe(200);
  });
  afterAll(async () => {
    await stack?.stop();
    for (const l of [byTool, byRisk, redirector]) await l?.close();
  });

  const dispatch = (tool: string, url: string) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, call(tool, { url }));

  it('fetches what the rules allow', async () => {
    const res = await dispatch('getter', `http://127.0.0.2:${redirector.port}/plain`);
    expect(res.body.settled.result).toEqual({ ok: true, body: 'fine' });
  });

  it.each(['to-tool-rule', 'to-risk-rule'])(
    'refuses a redirect hop %s, as a direct http_fetch does',
    async (path) => {
      const url = `http://127.0.0.2:${redirector.port}/${path}`;
      const direct = await dispatch('http_fetch', url);
      expect(direct.body.settled).toMatchObject({ outcome: 'error', error: { code: 'denied' } });
      const scripted = await dispatch('getter', url);
      expect(scripted.body.settled.result).toEqual({ ok: false, code: 'denied' });
      expect([...byTool.seen, ...byRisk.seen]).toEqual([]);
    },
  );
});

describe('a stack whose executor names no internal address (the default)', () => {
  let stack: TestStack;
  let secret: RecordingListener;

  beforeAll(async () => {
    secret = await recordingListener('127.0.0.1', (_req, res) => res.end('SECRET OF LOOPBACK'));
    stack = await startTestStack('fetchdefault');
    // No domain rule denies anything: the boundary is the executor's, not the tenant's.
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
    expect(put.status).toBe(200);
  });
  afterAll(async () => {
    await stack?.stop();
    await secret?.close();
  });

  it.each(['127.0.0.1', 'localhost', '0', '[::ffff:127.0.0.1]'])(
    'refuses an http_fetch of a service on loopback (%s), which sees nothing',
    async (host) => {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('http_fetch', { url: `http://${host}:${secret.port}/` }),
      );
      expect(res.body.settled).toMatchObject({
        outcome: 'error',
        error: { code: 'denied', details: { internal: true } },
      });
      expect(secret.seen).toEqual([]);
    },
  );
});
