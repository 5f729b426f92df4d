import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode } from '@toolgate/contracts';
import { runTool, type ToolDef } from '@toolgate/tools';
import { builtin, errorOf, ok as okResult, toolContext } from '../../test/tool-harness';
import type { CheckDomain } from './builtin-deps';
import type { ExecutionPolicyInput } from './execution-policy';
import type { HttpFetchResult } from './http-fetch-tool';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A real server on 127.0.0.1 that records every request it receives. */
async function startServer(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void,
) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    seen,
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const context = (signal?: AbortSignal) => toolContext('/', signal ? { signal } : {});
const ok = okResult<HttpFetchResult>;

/** The domain rules under test: only 127.0.0.1, every question recorded. */
function rules(allowed: string[] = ['127.0.0.1']): { checked: string[]; checkDomain: CheckDomain } {
  const checked: string[] = [];
  return {
    checked,
    checkDomain: (host) => {
      checked.push(host);
      return allowed.includes(host) ? 'allow' : 'deny';
    },
  };
}

/** The tool under test, its test servers on loopback opened to it (the executor's default: none). */
function fetchTool(checkDomain: CheckDomain, policy: Partial<ExecutionPolicyInput> = {}): ToolDef {
  return builtin('http_fetch', {
    policy: { cwd: '/', ...policy, http: { internal: ['127.0.0.0/8'], ...policy.http } },
    checkDomain,
  });
}

type Server = Awaited<ReturnType<typeof startServer>>;
let server: Server;
let other: Server | undefined;

beforeEach(async () => {
  server = await startServer((req, res, body) => {
    const url = new URL(req.url ?? '/', 'http://x');
    switch (url.pathname) {
      case '/hello':
        res.writeHead(200, { 'content-type': 'text/plain', 'x-answer': '42' }).end('hello');
        return;
      case '/echo':
        res
          .writeHead(201, { 'content-type': 'application/json' })
          .end(JSON.stringify({ method: req.method, body, token: req.headers['x-token'] ?? null }));
        return;
      case '/big':
        res.writeHead(200).end('z'.repeat(100_000));
        return;
      case '/redirect':
        res.writeHead(302, { location: url.searchParams.get('to') ?? '/hello' }).end();
        return;
      case '/hang':
        return; // never answers
      default:
        res.writeHead(404).end();
    }
  });
});

afterEach(async () => {
  await server.close();
  await other?.close();
  other = undefined;
});

it('fetches a URL on an allowed host', async () => {
  const { checkDomain, checked } = rules();
  const result = ok(
    await runTool(fetchTool(checkDomain), { url: `${server.origin}/hello` }, context()),
  );
  expect(result).toMatchObject({
    status: 200,
    url: `${server.origin}/hello`,
    body: 'hello',
    truncated: false,
    redirects: [],
  });
  expect((result.headers as Record<string, string>)['x-answer']).toBe('42');
  expect(checked).toEqual(['127.0.0.1']);
});

it('sends the method, headers and body', async () => {
  const { checkDomain } = rules();
  const result = ok(
    await runTool(
      fetchTool(checkDomain),
      {
        url: `${server.origin}/echo`,
        method: 'POST',
        headers: { 'x-token': 't1' },
        body: 'payload',
      },
      context(),
    ),
  );
  expect(result.status).toBe(201);
  expect(JSON.parse(result.body as string)).toEqual({
    method: 'POST',
    body: 'payload',
    token: 't1',
  });
});

it('never connects to a denied host', async () => {
  const { checkDomain, checked } = rules([]);
  const error = errorOf(
    await runTool(fetchTool(checkDomain), { url: `${server.origin}/hello` }, context()),
  );
  expect(error).toMatchObject({ code: ErrorCode.Denied, details: { host: '127.0.0.1' } });
  expect(checked).toEqual(['127.0.0.1']);
  expect(server.seen).toEqual([]);
});

it('fails closed when the domain check throws', async () => {
  const checkDomain: CheckDomain = () => {
    throw new Error('rule engine down');
  };
  expect(
    errorOf(await runTool(fetchTool(checkDomain), { url: `${server.origin}/hello` }, context()))
      .code,
  ).toBe(ErrorCode.Denied);
  expect(server.seen).toEqual([]);
});

it('checks the normalised host: case and a trailing dot do not dodge a rule', async () => {
  const { checkDomain, checked } = rules([]);
  errorOf(await runTool(fetchTool(checkDomain), { url: 'http://Denied.Example./x' }, context()));
  expect(checked).toEqual(['denied.example']);
});

it('follows a redirect by hand, checking the next hop', async () => {
  const { checkDomain, checked } = rules();
  const result = ok(
    await runTool(
      fetchTool(checkDomain),
      { url: `${server.origin}/redirect?to=/hello` },
      context(),
    ),
  );
  expect(result).toMatchObject({ status: 200, body: 'hello', url: `${server.origin}/hello` });
  expect(result.redirects).toEqual([`${server.origin}/hello`]);
  expect(checked).toEqual(['127.0.0.1', '127.0.0.1']);
});

it('refuses a redirect to a denied host before connecting to it', async () => {
  const { checkDomain, checked } = rules();
  const error = errorOf(
    await runTool(
      fetchTool(checkDomain),
      { url: `${server.origin}/redirect?to=${encodeURIComponent('http://denied.invalid/steal')}` },
      context(),
    ),
  );
  expect(error).toMatchObject({ code: ErrorCode.Denied, details: { host: 'denied.invalid' } });
  expect(checked).toEqual(['127.0.0.1', 'denied.invalid']);
  expect(server.seen.map((s) => s.url)).toEqual([
    '/redirect?to=http%3A%2F%2Fdenied.invalid%2Fsteal',
  ]);
});

it('refuses a redirect to a non-http scheme', async () => {
  const { checkDomain } = rules();
  const error = errorOf(
    await runTool(
      fetchTool(checkDomain),
      { url: `${server.origin}/redirect?to=file:///etc/passwd` },
      context(),
    ),
  );
  expect(error.code).toBe(ErrorCode.Denied);
  expect(error.message).toMatch(/file:/);
});

it('drops credentials when a redirect changes origin', async () => {
  other = await startServer((_req, res) => res.writeHead(200).end('other'));
  const { checkDomain } = rules();
  const result = ok(
    await runTool(
      fetchTool(checkDomain),
      {
        url: `${server.origin}/redirect?to=${encodeURIComponent(`${other.origin}/x`)}`,
        headers: { authorization: 'Bearer secret', 'x-trace': 'keep' },
      },
      context(),
    ),
  );
  expect(result.body).toBe('other');
  expect(server.seen[0]?.headers.authorization).toBe('Bearer secret');
  expect(other.seen[0]?.headers.authorization).toBeUndefined();
  expect(other.seen[0]?.headers['x-trace']).toBe('keep');
});

it('stops after the policy number of redirects', async () => {
  const { checkDomain } = rules();
  const loop = `${server.origin}/redirect?to=${encodeURIComponent('/redirect?to=/redirect')}`;
  const error = errorOf(
    await runTool(fetchTool(checkDomain, { http: { maxRedirects: 1 } }), { url: loop }, context()),
  );
  expect(error.code).toBe(ErrorCode.ToolFailed);
  expect(error.message).toMatch(/more than 1 redirects/);
});

it('caps the response body', async () => {
  const { checkDomain } = rules();
  const result = ok(
    await runTool(
      fetchTool(checkDomain, { maxOutputBytes: 1000 }),
      { url: `${server.origin}/big` },
      context(),
    ),
  );
  expect(result.body).toBe('z'.repeat(1000));
  expect(result.truncated).toBe(true);
});

it('refuses non-http schemes as invalid arguments, before any domain check', async () => {
  const { checkDomain, checked } = rules();
  for (const url of [
    'file:///etc/passwd',
    'ftp://127.0.0.1/x',
    'javascript:alert(1)',
    '/relative',
  ]) {
    expect(errorOf(await runTool(fetchTool(checkDomain), { url }, context())).code).toBe(
      ErrorCode.InvalidArguments,
    );
  }
  expect(
    errorOf(
      await runTool(
        fetchTool(checkDomain),
        { url: `${server.origin}/x`, method: 'TRACE' },
        context(),
      ),
    ).code,
  ).toBe(ErrorCode.InvalidArguments);
  expect(checked).toEqual([]);
});

it('is cancelled by the dispatch signal while waiting for an answer', async () => {
  const { checkDomain } = rules();
  const controller = new AbortController();
  const running = runTool(
    fetchTool(checkDomain),
    { url: `${server.origin}/hang` },
    context(controller.signal),
  );
  // Abort only once the server holds the request, so the abort hits an open connection.
  while (server.seen.length === 0) await new Promise((r) => setTimeout(r, 10));
  controller.abort();
  expect(errorOf(await running).code).toBe(ErrorCode.Cancelled);
});

it('times out by the policy deadline', async () => {
  const { checkDomain } = rules();
  const error = errorOf(
    await runTool(
      fetchTool(checkDomain, { http: { timeoutMs: 200 } }),
      { url: `${server.origin}/hang` },
      context(),
    ),
  );
  expect(error.code).toBe(ErrorCode.Timeout);
});
