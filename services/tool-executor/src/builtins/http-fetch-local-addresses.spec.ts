import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { ErrorCode } from '@toolgate/contracts';
import { checkFetchHost, compilePermissionChain } from '@toolgate/permissions';
import { runTool } from '@toolgate/tools';
import { builtin, errorOf, ok, toolContext } from '../../test/tool-harness';
import type { HttpFetchResult } from './http-fetch-tool';
import { routesToThisHost } from './internal-addresses';

/** The domain rules are under test here: every internal address opened (the default: none). */
const EVERY_ADDRESS = ['0.0.0.0/0', '::/0'];

/**
 * Addresses, not spellings (issue 23, finding 7): with loopback denied (`127.0.0.0/8`, `::1`,
 * `localhost`), every address the kernel delivers to this machine is refused — the unspecified
 * ones, IPv4-mapped and NAT64 forms of them, zero-prefixed numbers and this machine's own
 * interface addresses — against a real listener on every address, which first answers each of
 * them when nothing is denied.
 */
let server: http.Server;
let port: number;
let seen = 0;

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    seen++;
    res.end('local');
  });
  // Every address, both families: what a service listening on "all interfaces" looks like.
  await new Promise<void>((resolve) => server.listen(0, '::', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const ownAddress = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && !a.internal && a.family === 'IPv4')?.address;

const spellings = [
  '0',
  '0.0.0.0',
  '0x0',
  '00.0.0.0',
  '0.0',
  '0.0.0.0.',
  '[::]',
  '[0:0:0:0:0:0:0:0]',
  '[::ffff:0:0]',
  '[::ffff:0.0.0.0]',
  '[::ffff:127.0.0.1]',
  '[64:ff9b::7f00:1]',
  '[::ffff:0:7f00:1]',
  ...(ownAddress ? [ownAddress] : []),
];

const fetcher = (domains: string[]) => {
  const chain = compilePermissionChain({
    deny: domains.length ? [{ tool: 'http_fetch', domains }] : [],
  });
  return builtin('http_fetch', {
    policy: { cwd: '/', http: { internal: EVERY_ADDRESS } },
    checkDomain: (host) => checkFetchHost(chain, host).verdict,
  });
};

const open = fetcher([]);
const loopbackDenied = fetcher(['127.0.0.0/8', '::1', 'localhost']);

describe.each(spellings)('http://%s/', (spelling) => {
  const url = () => `http://${spelling}:${port}/`;

  it('reaches the local listener when nothing is denied', async () => {
    const result = await runTool(open, { url: url() }, toolContext('/'));
    // The kernel may refuse a spelling outright (no NAT64 here); where it connects, it is us.
    if (result.ok) expect(ok<HttpFetchResult>(result).body).toBe('local');
    else expect(errorOf(result).code).toBe(ErrorCode.ToolFailed);
  });

  it('is refused when loopback is denied, and the listener sees nothing', async () => {
    const before = seen;
    const result = await runTool(loopbackDenied, { url: url() }, toolContext('/'));
    expect(errorOf(result).code).toBe(ErrorCode.Denied);
    expect(seen).toBe(before);
  });
});

it('the unspecified spellings do reach this host when nothing is denied (the attack is real)', async () => {
  for (const spelling of ['0', '0.0.0.0', '0x0', '[::]', '[::ffff:0:0]']) {
    const result = await runTool(open, { url: `http://${spelling}:${port}/` }, toolContext('/'));
    expect({ spelling, body: ok<HttpFetchResult>(result).body }).toEqual({
      spelling,
      body: 'local',
    });
  }
});

it('an unspecified IPv6 address meets a rule that names only 127.0.0.0/8', async () => {
  const v4Only = fetcher(['127.0.0.0/8']);
  const result = await runTool(v4Only, { url: `http://[::]:${port}/` }, toolContext('/'));
  expect(errorOf(result).code).toBe(ErrorCode.Denied);
});

it('knows which addresses reach this host', () => {
  for (const a of ['0.0.0.0', '0.1.2.3', '127.8.9.1', '::', '::1'])
    expect(routesToThisHost(a)).toBe(true);
  for (const a of ['8.8.8.8', '2001:db8::1', 'example.com'])
    expect(routesToThisHost(a)).toBe(false);
  if (ownAddress) expect(routesToThisHost(ownAddress)).toBe(true);
});
