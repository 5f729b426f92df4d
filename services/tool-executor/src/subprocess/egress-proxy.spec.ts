/**
 * The egress proxy on its own, spoken to over its Unix socket as the bridge in a sandbox speaks
 * to it: what it tunnels, what it refuses before resolving anything, and its bounds — hostile
 * request lines and headers, more connections than it holds, tunnels outliving the call.
 */
import { promises as fs } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadExecutorConfig } from '../config';
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

/**
 * Sends `text` on a fresh connection to the proxy (not half-closed: a client that ends its side
 * aborts its requests); resolves with everything it answers until it closes the connection.
 */
function exchange(text: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(proxy.socket);
    let got = '';
    s.on('data', (d) => (got += d));
    s.on('close', () => resolve(got));
    s.on('error', () => undefined);
    s.write(text);
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
      /^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*Toolgate-Error: denied\r\n[\s\S]*is not a host the tool declares\n$/,
    );
  }
  expect(checked).toEqual([]);
  expect(upstreamSockets.size).toBe(0);
});

it('answers hostile request lines and headers with an error, never a connection', async () => {
  // Each a refusal of the proxy's own, typed: `Toolgate-Error` carries its code.
  const refused = (status: number, code: string) =>
    new RegExp(`^HTTP/1\\.1 ${status} [\\s\\S]*\\r\\nToolgate-Error: ${code}\\r\\n`, 'i');
  expect(await exchange('CONNECT localhost HTTP/1.1\r\n\r\n')).toMatch(
    refused(400, 'invalid-request'),
  );
  expect(await exchange(`CONNECT localhost:99999 HTTP/1.1\r\n\r\n`)).toMatch(
    refused(400, 'invalid-request'),
  );
  expect(await exchange('\x00\x01 garbage\r\n\r\n')).toMatch(refused(400, 'invalid-request'));
  expect(await exchange('GET http://localhost:0/ HTTP/1.1\r\nHost: localhost\r\n\r\n')).toMatch(
    refused(400, 'invalid-request'),
  );
  const relative = await exchange('GET /relative HTTP/1.1\r\nHost: localhost\r\n\r\n');
  expect(relative).toMatch(refused(400, 'invalid-request'));
  expect(relative).toMatch(/absolute http:\/\/ URL\n$/);
  expect(
    await exchange(`GET http://localhost:${port}/ HTTP/1.1\r\nX: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
  ).toMatch(refused(431, 'too-large'));
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

/** An HTTP server on 127.0.0.1 that records each request's method, path and body, and answers. */
async function recordingUpstream() {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      res.end('seen');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A raw TCP server on 127.0.0.1 running `onSocket` for each connection; counts them. */
async function rawServer(onSocket: (s: net.Socket) => void) {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    onSocket(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    sockets,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

it('answers 502 for an upstream answer it cannot repeat, and keeps serving (red team: it crashed the executor)', async () => {
  for (const statusLine of ['HTTP/1.1 200 O\x01K', 'HTTP/1.1 200 O\x7fK', 'HTTP/1.1 099 OK']) {
    const hostile = await rawServer((s) =>
      s.once('data', () => s.end(`${statusLine}\r\nContent-Length: 2\r\n\r\nok`)),
    );
    const got = await exchange(
      `GET http://localhost:${hostile.port}/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    );
    expect(got).toMatch(
      /^HTTP\/1\.1 502 [\s\S]*toolgate-error: unavailable\r\n[\s\S]*an answer the proxy cannot repeat/i,
    );
    await hostile.close();
  }
  const s = await tunnel();
  expect(await echo(s, 'still here')).toBe('still here');
  s.destroy();
});

it(`opens at most ${MAX_EGRESS_CONNECTIONS} upstream connections, however many requests one connection pipelines (red team)`, async () => {
  const blackhole = await rawServer(() => undefined);
  const requests = Array.from(
    { length: 500 },
    (_, i) => `GET http://localhost:${blackhole.port}/${i} HTTP/1.1\r\nHost: localhost\r\n\r\n`,
  ).join('');
  const s = net.connect(proxy.socket, () => s.write(requests));
  s.on('error', () => undefined);
  await new Promise((r) => setTimeout(r, 1000));
  expect(blackhole.sockets.length).toBeLessThanOrEqual(MAX_EGRESS_CONNECTIONS);
  expect(blackhole.sockets.length).toBeGreaterThan(0);
  s.destroy();
  await blackhole.close();
});

it('opens nothing for a request whose checks end after the call (red team)', async () => {
  const blackhole = await rawServer(() => undefined);
  await proxy.close();
  proxy = await EgressProxy.open({
    hosts: ['localhost'],
    checkDomain: (host) =>
      new Promise((resolve) => setTimeout(() => resolve(host ? 'allow' : 'deny'), 300)),
    internal: new InternalAllowance(['127.0.0.0/8', '::1']),
    who: 'tool',
  });
  const sockets = [
    `GET http://localhost:${blackhole.port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    `CONNECT localhost:${blackhole.port} HTTP/1.1\r\n\r\n`,
  ].map((text) => {
    const s = net.connect(proxy.socket, () => s.write(text));
    s.on('error', () => undefined);
    return s;
  });
  await new Promise((r) => setTimeout(r, 100));
  await proxy.close();
  await new Promise((r) => setTimeout(r, 600));
  expect(blackhole.sockets).toEqual([]);
  for (const s of sockets) s.destroy();
  await blackhole.close();
});

it('forwards a body the tool sent chunked as chunked, not as bytes run into the next request', async () => {
  const { port: p, seen, close } = await recordingUpstream();
  const got = await exchange(
    `GET http://localhost:${p}/ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
  );
  expect(got).toMatch(/^HTTP\/1\.1 200 [\s\S]*seen$/);
  expect(seen).toEqual(['GET / abc']);
  await close();
});

it('keeps the proxies where no tool scope reaches: the executor refuses a scope holding them', async () => {
  // A temporary directory of the test's own: the machine's may hold this checkout (a CI clone in
  // /tmp), which the executor refuses as a scope for that reason first.
  const tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-tmpdir-')));
  try {
    for (const env of [
      { EXECUTOR_CWD: tmp },
      { EXECUTOR_READ_PATHS: tmp },
      { EXECUTOR_WRITE_PATHS: tmp },
    ]) {
      expect(() =>
        loadExecutorConfig({ EXECUTOR_CWD: path.dirname(proxy.socket), TMPDIR: tmp, ...env }),
      ).toThrow(
        /^TMPDIR \(the egress proxies’ sockets\) is inside EXECUTOR_(CWD|READ_PATHS|WRITE_PATHS)/,
      );
    }
    // A directory beside them is fine.
    const beside = await fs.mkdtemp(path.join(tmp, 'work-'));
    expect(() => loadExecutorConfig({ EXECUTOR_CWD: beside, TMPDIR: tmp })).not.toThrow();
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
});

it('lets go of a forwarded request’s upstream when the tool does (second red team: 64 aborts starved the call)', async () => {
  // It reads (and drops) what comes, so it sees the proxy close its side.
  const blackhole = await rawServer((s) => s.resume());
  const clients = Array.from({ length: MAX_EGRESS_CONNECTIONS }, () => {
    const s = net.connect(proxy.socket, () =>
      s.write(`GET http://localhost:${blackhole.port}/ HTTP/1.1\r\nHost: x\r\n\r\n`),
    );
    s.on('error', () => undefined);
    return s;
  });
  while (blackhole.sockets.length < MAX_EGRESS_CONNECTIONS)
    await new Promise((r) => setTimeout(r, 10));
  const released = blackhole.sockets.map((s) => new Promise((r) => s.once('close', r)));
  for (const s of clients) s.destroy();
  await Promise.all(released);
  const s = await tunnel();
  expect(await echo(s, 'room again')).toBe('room again');
  s.destroy();
  await blackhole.close();
});

it('answers an unasked-for 101 with a 502 rather than leaving the tool waiting', async () => {
  const switcher = await rawServer((s) =>
    s.once('data', () =>
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n'),
    ),
  );
  expect(
    await exchange(`GET http://localhost:${switcher.port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n`),
  ).toMatch(/^HTTP\/1\.1 502 [\s\S]*switching protocols is not proxied/);
  await switcher.close();
});

it('keeps a body’s length however the tool lists it in Connection', async () => {
  const { port: p, seen, close } = await recordingUpstream();
  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: other\r\n\r\n';
  const got = await exchange(
    `GET http://localhost:${p}/ HTTP/1.1\r\nHost: localhost\r\nConnection: content-length, close\r\n` +
      `Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
  );
  expect(got).toMatch(/^HTTP\/1\.1 200 [\s\S]*seen$/);
  expect(seen).toEqual([`GET / ${smuggled}`]);
  await close();
});

/** Requests for `localhost` on the other listener's port (and, forwarded, on no port: 80). */
const elsewhere = (otherPort: number, withDefault: boolean) => [
  `CONNECT localhost:${otherPort} HTTP/1.1\r\n\r\n`,
  `GET http://localhost:${otherPort}/ HTTP/1.1\r\nHost: localhost\r\n\r\n`,
  ...(withDefault ? [`GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n`] : []),
];

it.each([
  {
    what: 'an internal address the operator names with a port',
    hosts: () => ['localhost'],
    // `localhost` is 127.0.0.1 here (and ::1 where the machine resolves it so): both on `port`.
    internal: () => [`127.0.0.1:${port}`, `[::1]:${port}`],
    withDefault: false,
    refusal: (otherPort: number) => `internal address[\\s\\S]*on port ${otherPort}`,
  },
  {
    what: 'a host the tool declares with a port',
    hosts: () => [`localhost:${port}`],
    internal: () => ['127.0.0.0/8', '::1'],
    withDefault: true,
    refusal: () => `localhost is declared on port ${port}, not \\d+`,
  },
])('reaches $what on that port only', async ({ hosts, internal, withDefault, refusal }) => {
  const other = await rawServer((s) => s.end('other'));
  await proxy.close();
  proxy = await EgressProxy.open({
    hosts: hosts(),
    checkDomain: () => 'allow',
    internal: new InternalAllowance(internal()),
    who: 'tool',
  });
  const s = await tunnel();
  expect(await echo(s, 'the named port')).toBe('the named port');
  s.destroy();
  for (const request of elsewhere(other.port, withDefault)) {
    expect(await exchange(request)).toMatch(
      new RegExp(
        `^HTTP/1\\.1 403 Forbidden\\r\\n[\\s\\S]*Toolgate-Error: denied\\r\\n[\\s\\S]*${refusal(other.port)}\\n$`,
      ),
    );
  }
  expect(other.sockets).toEqual([]);
  await other.close();
});
