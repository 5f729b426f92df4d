import http from 'node:http';
import { ErrorCode } from '@toolgate/contracts';
import {
  checkFetchHost,
  compilePermissionChain,
  evaluatePermission,
  type PermissionChain,
} from '@toolgate/permissions';
import { recordingListener, type RecordingListener } from '@toolgate/testing';
import { runTool, type ToolDef } from '@toolgate/tools';
import { builtin, errorOf, ok, toolContext } from '../../test/tool-harness';
import type { HttpFetchResult } from './http-fetch-tool';

/** The domain rules are under test here: every internal address opened (the default: none). */
const EVERY_ADDRESS = ['0.0.0.0/0', '::/0'];

/**
 * One canonical host for every domain decision. A server on 127.0.0.1 is denied by a rule that
 * names it once; every other spelling of that address — IPv4 numeric forms, IPv6 forms that carry
 * it, a trailing dot, a name that resolves to it — is refused too, directly and after a redirect
 * from an allowed server on another address, and the denied server never sees a request.
 */

type Server = RecordingListener;

const serve = (host: string, handler: (url: URL, res: http.ServerResponse) => void) =>
  recordingListener(host, (req, res) => handler(new URL(req.url ?? '/', 'http://x'), res));

const answer = (body: string) => (url: URL, res: http.ServerResponse) => {
  if (url.pathname === '/redirect') {
    // Header values are bytes: a location with non-ASCII characters goes out percent-encoded.
    const to = (url.searchParams.get('to') ?? '/').replace(/[^\x21-\x7e]/g, encodeURIComponent);
    res.writeHead(302, { location: to }).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
};

let denied: Server;
let allowed: Server;
let allowedV6: Server;
let chain: PermissionChain;
let fetchTool: ToolDef;

beforeAll(async () => {
  denied = await serve('127.0.0.1', answer('secret'));
  allowed = await serve('127.0.0.2', answer('public'));
  allowedV6 = await serve('::1', answer('public v6'));
  chain = compilePermissionChain({ deny: [{ tool: 'http_fetch', domains: ['127.0.0.1'] }] });
  fetchTool = builtin('http_fetch', {
    policy: { cwd: '/', http: { internal: EVERY_ADDRESS } },
    checkDomain: (host) => checkFetchHost(chain, host).verdict,
  });
});

afterAll(async () => {
  await Promise.all([denied.close(), allowed.close(), allowedV6.close()]);
});

afterEach(() => {
  // Each test proves its point only if the denied server saw nothing.
  expect(denied.seen).toEqual([]);
});

const fetchUrl = (url: string) => runTool(fetchTool, { url }, toolContext('/'));

/** Every spelling of 127.0.0.1 we know a client to accept. */
const spellings = [
  '127.0.0.1',
  '127.0.0.1.',
  '2130706433',
  '0177.0.0.1',
  '0x7f.1',
  '0x7f000001',
  '127.1',
  '127.0.1',
  '127%2e0.0.1',
  '127\u30020\u30020\u30021',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[0:0:0:0:0:ffff:7f00:1]',
  '[::FFFF:127.0.0.1]',
  '[::127.0.0.1]',
  '[::ffff:0:127.0.0.1]',
  '[64:ff9b::127.0.0.1]',
  'localhost',
  'LocalHost.',
  'ignored@127.0.0.1',
  'allowed.example:pw@[::ffff:7f00:1]',
];

describe.each(spellings)('the denied address spelled %s', (spelling) => {
  const url = () => `http://${spelling}:${denied.port}/`;

  it('is refused directly', async () => {
    expect(errorOf(await fetchUrl(url())).code).toBe(ErrorCode.Denied);
  });

  it('is refused after a redirect from an allowed server', async () => {
    const via = `http://127.0.0.2:${allowed.port}/redirect?to=${encodeURIComponent(url())}`;
    expect(errorOf(await fetchUrl(via)).code).toBe(ErrorCode.Denied);
    expect(allowed.seen.at(-1)).toContain('/redirect');
  });
});

it('the chain denies the literal spellings before anything runs', async () => {
  const tool = { name: 'http_fetch', risk: 'network' as const };
  for (const spelling of spellings.filter((s) => !/localhost/i.test(s))) {
    const d = await evaluatePermission(chain, tool, {
      url: `http://${spelling}:${denied.port}/`,
    });
    expect({ spelling, verdict: d.verdict, decidedBy: d.decidedBy }).toEqual({
      spelling,
      verdict: 'deny',
      decidedBy: 'deny-rule',
    });
  }
});

it('a name is checked on the address it resolves to, and the refusal says so', async () => {
  const error = errorOf(await fetchUrl(`http://localhost:${denied.port}/`));
  expect(error).toMatchObject({
    code: ErrorCode.Denied,
    message: expect.stringContaining('resolves to 127.0.0.1'),
  });
});

it('allowed hosts still work, IPv4 and IPv6, directly and through a redirect', async () => {
  const v4 = `http://127.0.0.2:${allowed.port}/`;
  const v6 = `http://[::1]:${allowedV6.port}/`;
  expect(ok<HttpFetchResult>(await fetchUrl(v4)).body).toBe('public');
  expect(ok<HttpFetchResult>(await fetchUrl(v6)).body).toBe('public v6');
  const hop = ok<HttpFetchResult>(await fetchUrl(`${v4}redirect?to=${encodeURIComponent(v6)}`));
  expect(hop).toMatchObject({ status: 200, body: 'public v6', redirects: [v6] });
});

it('an address range covers every address in it, in any spelling', async () => {
  const ranged = compilePermissionChain({
    deny: [{ tool: 'http_fetch', domains: ['127.0.0.0/8', '::1/128'] }],
  });
  const tool = builtin('http_fetch', {
    policy: { cwd: '/', http: { internal: EVERY_ADDRESS } },
    checkDomain: (host) => checkFetchHost(ranged, host).verdict,
  });
  for (const url of [
    `http://127.0.0.2:${allowed.port}/`,
    `http://[::ffff:127.0.0.2]:${allowed.port}/`,
    `http://[::1]:${allowedV6.port}/`,
  ]) {
    expect(errorOf(await runTool(tool, { url }, toolContext('/'))).code).toBe(ErrorCode.Denied);
  }
});
