/**
 * The egress proxy on its own, spoken to over its Unix socket as the bridge in a sandbox speaks
 * to it: what it tunnels, what it refuses before resolving anything, and its bounds — hostile
 * request lines and headers, more connections than it holds, tunnels outliving the call.
 */
import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { InternalAllowance } from '../builtins/internal-addresses';
import { EgressProxy, MAX_EGRESS_CONNECTIONS } from './egress-proxy';

let proxy: EgressProxy;
let upstream: net.Server;
let port: number;
const upstreamSockets = new Set<net.Socket>();
const checked: string[] = [];

beforeAll(async () => {
  upstream = net.createServer((s) => {
    upstreamSockets.add(s);
    s.on('close', () => upstreamSockets.delete(s));
    s.on('error', () => undefined);
    s.pipe(s); // an echo
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = (upstream.address() as net.AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())));

beforeEach(async () => {
  checked.length = 0;
  proxy = await EgressProxy.open({
    hosts: ['localhost'],
    checkDomain: (host) => {
      checked.push(host);
      return 'allow';
    },
    internal: new InternalAllowance(['127.0.0.0/8', '::1']),
    who: 'tool',
  });
});
afterEach(() => proxy.close());

/** Sends `text` on a fresh connection to the proxy; resolves with everything it answers. */
function exchange(text: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(proxy.socket);
    let got = '';
    s.on('data', (d) => (got += d));
    s.on('close', () => resolve(got));
    s.on('error', () => undefined);
    s.end(text);
  });
}

/** Opens a tunnel to localhost:port; resolves with the socket once the proxy said 200. */
function tunnel(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxy.socket, () =>
      s.write(`CONNECT localhost:${port} HTTP/1.1\r\n\r\n`),
    );
    s.once('data', (d) =>
      String(d).startsWith('HTTP/1.1 200') ? resolve(s) : reject(new Error(String(d))),
    );
    s.once('close', () => reject(new Error('closed')));
    s.on('error', () => undefined);
  });
}

/** Writes `text` through a tunnel; resolves with what comes back (the upstream echoes). */
function echo(s: net.Socket, text: string): Promise<string> {
  const echoed = new Promise<string>((resolve) => s.once('data', (d) => resolve(String(d))));
  s.write(text);
  return echoed;
}

it('tunnels to a declared host, bytes both ways, in a directory only its user can enter', async () => {
  const s = await tunnel();
  expect(await echo(s, 'ping')).toBe('ping');
  s.destroy();
  expect((await fs.stat(path.dirname(proxy.socket))).mode & 0o777).toBe(0o700);
  expect(checked).toContain('localhost');
});

it('refuses undeclared hosts and address literals before resolving or checking anything', async () => {
  for (const target of [
    `127.0.0.1:${port}`,
    `[::1]:${port}`,
    `LOCALHOST.evil.example:${port}`,
    `2130706433:${port}`,
  ]) {
    expect(await exchange(`CONNECT ${target} HTTP/1.1\r\n\r\n`)).toMatch(
      /^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*is not a host the tool declares\n$/,
    );
  }
  expect(checked).toEqual([]);
  expect(upstreamSockets.size).toBe(0);
});

it('answers hostile request lines and headers with an error, never a connection', async () => {
  expect(await exchange('CONNECT localhost HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
  expect(await exchange(`CONNECT localhost:99999 HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400 /);
  expect(await exchange('\x00\x01 garbage\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
  expect(await exchange('GET /relative HTTP/1.1\r\nHost: localhost\r\n\r\n')).toMatch(
    /^HTTP\/1\.1 400 [\s\S]*absolute http:\/\/ URL/,
  );
  expect(
    await exchange(`GET http://localhost:${port}/ HTTP/1.1\r\nX: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
  ).toMatch(/^HTTP\/1\.1 431 /);
  expect(upstreamSockets.size).toBe(0);
});

it(`holds at most ${MAX_EGRESS_CONNECTIONS} connections at once`, async () => {
  const open = await Promise.all(Array.from({ length: MAX_EGRESS_CONNECTIONS }, () => tunnel()));
  await expect(tunnel()).rejects.toThrow('closed');
  // Each tunnel carries bytes end to end: its upstream socket is open (not merely being accepted).
  await Promise.all(open.map((s) => echo(s, 'x')));
  expect(upstreamSockets.size).toBe(MAX_EGRESS_CONNECTIONS);
  for (const s of open) s.destroy();
});

it('ends every tunnel with the call, and removes its socket', async () => {
  const s = await tunnel();
  const ended = new Promise<void>((resolve) => s.once('close', () => resolve()));
  await proxy.close();
  await ended;
  await expect(fs.stat(proxy.socket)).rejects.toMatchObject({ code: 'ENOENT' });
  // The upstream side goes too, not left to the peer.
  for (let i = 0; i < 50 && upstreamSockets.size > 0; i++)
    await new Promise((r) => setTimeout(r, 10));
  expect(upstreamSockets.size).toBe(0);
});
