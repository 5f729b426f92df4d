/**
 * Egress through a Unix socket, proved with real bubblewrap: the run's connections to
 * 127.0.0.1:EGRESS_PORT arrive at the host's socket, and nothing else leaves its network
 * namespace — a listener on the host's loopback, the host's own address and the proxy port taken
 * by the command all fail, whatever the command does to the bridge. The bridge is transparent to
 * the command: stdin, stdout, exit codes and signals are the command's.
 */
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { hostAddresses } from '@toolgate/testing';
import { sandboxSpec } from '../test/sandbox-spec';
import { EGRESS_PORT } from './egress-bridge';

const spec = sandboxSpec({ prefix: 'tg-egress-' });

/** A listener that answers `reply` and counts who came. */
function listener(reply: string) {
  const seen: string[] = [];
  const server = net.createServer((socket) => {
    seen.push(String(socket.remoteAddress ?? 'unix'));
    socket.on('error', () => undefined);
    socket.end(reply);
  });
  return { server, seen };
}

let socketDir: string;
let socketPath: string;
const viaSocket = listener('via-socket');
const onLoopback = listener('host-loopback');
let loopbackPort: number;

beforeAll(async () => {
  socketDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egress-sock-'));
  socketPath = path.join(socketDir, 'egress.sock');
  await new Promise<void>((resolve) => viaSocket.server.listen(socketPath, resolve));
  await new Promise<void>((resolve) => onLoopback.server.listen(0, '0.0.0.0', resolve));
  loopbackPort = (onLoopback.server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  viaSocket.server.close();
  onLoopback.server.close();
  await fs.rm(socketDir, { recursive: true, force: true });
});

beforeEach(() => {
  viaSocket.seen.length = 0;
  onLoopback.seen.length = 0;
});

/** A node script run in the sandbox with egress; prints what each dial got, one JSON line each. */
function dials(targets: { host: string; port: number }[]): string {
  return `const net = require('net');
const targets = ${JSON.stringify(targets)};
(async () => {
  for (const t of targets) {
    const got = await new Promise((resolve) => {
      const s = net.connect(t.port, t.host);
      let data = '';
      s.setTimeout(3000, () => { s.destroy(); resolve('timeout'); });
      s.on('data', (d) => (data += d));
      s.on('end', () => resolve(data));
      s.on('error', (e) => resolve(e.code));
    });
    console.log(JSON.stringify(got));
  }
})();`;
}

const run = (argv: string[], extra: { stdin?: string } = {}) =>
  spec.sandbox.run({
    argv,
    cwd: spec.work,
    env: { PATH: '/usr/bin:/bin' },
    timeoutMs: 20_000,
    maxOutputBytes: 1024 * 1024,
    egress: socketPath,
    ...extra,
  });

it('reaches the socket through the proxy port and nothing on the host directly', async () => {
  const targets = [
    { host: '127.0.0.1', port: EGRESS_PORT },
    { host: '127.0.0.1', port: loopbackPort },
    ...hostAddresses().map((host) => ({ host, port: loopbackPort })),
  ];
  const result = await run(['/usr/bin/node', '-e', dials(targets)]);
  expect(result.stderr.text()).toBe('');
  const lines = result.stdout
    .text()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as string);
  expect(lines[0]).toBe('via-socket');
  // No route out of the namespace: refused on its own loopback, unreachable elsewhere.
  for (const got of lines.slice(1)) expect(['ECONNREFUSED', 'ENETUNREACH']).toContain(got);
  expect(lines).toHaveLength(targets.length);
  expect(viaSocket.seen).toHaveLength(1);
  expect(onLoopback.seen).toEqual([]);
});

it('the same dials without egress (the host network) reach the host listener: the attack can succeed', async () => {
  const result = await spec.sandbox.run({
    argv: ['/usr/bin/node', '-e', dials([{ host: '127.0.0.1', port: loopbackPort }])],
    cwd: spec.work,
    env: { PATH: '/usr/bin:/bin' },
    timeoutMs: 20_000,
    maxOutputBytes: 1024 * 1024,
    network: true,
  });
  expect(JSON.parse(result.stdout.text())).toBe('host-loopback');
  expect(onLoopback.seen).toHaveLength(1);
});

it('names the proxy in the environment, over whatever the command was given', async () => {
  const result = await spec.sandbox.run({
    argv: [
      '/bin/sh',
      '-c',
      'echo "$HTTPS_PROXY $http_proxy [$NO_PROXY] $MINE [$NODE_OPTIONS] [$TOOLGATE_TOOL_NODE_OPTIONS]"',
    ],
    cwd: spec.work,
    env: {
      PATH: '/usr/bin:/bin',
      HTTPS_PROXY: 'http://evil:1',
      NO_PROXY: '*',
      MINE: 'kept',
      // A Node option that would stop the bridge (also Node) from starting: the command's alone.
      NODE_OPTIONS: '--require /nonexistent/preload.js',
    },
    timeoutMs: 20_000,
    maxOutputBytes: 4096,
    egress: socketPath,
  });
  expect(result.stderr.text()).toBe('');
  expect(result.stdout.text()).toBe(
    `http://127.0.0.1:${EGRESS_PORT} http://127.0.0.1:${EGRESS_PORT} [] kept [--require /nonexistent/preload.js] []\n`,
  );
});

it('kills of the bridge and a port taken first leave the command no way out', async () => {
  // The command is the bridge's child: it kills its parent, then dials the host and binds the
  // proxy port itself. The run ends (the namespace goes with the bridge) and the host saw nothing.
  const attack = `const net = require('net');
const busy = net.createServer().listen(${EGRESS_PORT}, '127.0.0.1');
busy.on('error', (e) => console.log(JSON.stringify('bind ' + e.code)));
busy.on('listening', () => console.log(JSON.stringify('bound')));
setTimeout(() => {
  try { process.kill(process.ppid, 'SIGKILL'); } catch (e) { console.log(JSON.stringify('kill ' + e.code)); }
  setTimeout(() => net.connect(${loopbackPort}, '127.0.0.1').on('error', (e) => console.log(JSON.stringify(e.code))), 200);
}, 200);`;
  const result = await run(['/usr/bin/node', '-e', attack]);
  expect(result.stdout.text()).toContain('"bind EADDRINUSE"');
  expect(result.ending).not.toBe('timeout');
  expect(onLoopback.seen).toEqual([]);
});

it('passes stdin, stdout and the exit status through the bridge', async () => {
  const echoed = await run(['/bin/sh', '-c', 'cat; exit 7'], { stdin: '{"a":1}' });
  expect(echoed.stdout.text()).toBe('{"a":1}');
  expect(echoed.exitCode).toBe(7);
  const killed = await run(['/bin/sh', '-c', 'kill -TERM $$']);
  expect(killed.exitCode).toBe(128 + os.constants.signals.SIGTERM);
  const missing = await run(['/nonexistent/tool']);
  expect(missing.exitCode).toBe(127);
});

it('refuses a run asking for both the host network and egress', async () => {
  await expect(
    spec.sandbox.run({
      argv: ['true'],
      cwd: spec.work,
      env: {},
      timeoutMs: 5000,
      maxOutputBytes: 1024,
      network: true,
      egress: socketPath,
    }),
  ).rejects.toMatchObject({ code: 'config' });
});

it('binds no scope holding the egress sockets: a run cannot reach another call’s proxy', async () => {
  // Another call's proxy, where the executor keeps them.
  await fs.mkdir(spec.sandbox.egressRoot, { recursive: true, mode: 0o700 });
  const other = listener('another call’s egress');
  const otherSocket = path.join(spec.sandbox.egressRoot, 'other.sock');
  await new Promise<void>((resolve) => other.server.listen(otherSocket, resolve));
  try {
    const connect = `require('net').connect(${JSON.stringify(otherSocket)}).on('data', (d) => console.log(String(d))).on('error', (e) => console.log(e.code))`;
    // The scopes that would hold it: the temporary directory, the root itself, as cwd or not.
    const tmp = await fs.realpath(os.tmpdir());
    for (const scope of [
      { cwd: tmp },
      { readOnlyPaths: [tmp] },
      { writablePaths: [spec.sandbox.egressRoot] },
    ]) {
      await expect(
        spec.sandbox.run({
          argv: ['/usr/bin/node', '-e', connect],
          cwd: spec.work,
          env: { PATH: '/usr/bin:/bin' },
          timeoutMs: 20_000,
          maxOutputBytes: 4096,
          ...scope,
        }),
      ).rejects.toMatchObject({ code: 'config' });
    }
    // A directory of its own beside them is fine, and cannot see the socket.
    const result = await run(['/usr/bin/node', '-e', connect]);
    expect(result.stdout.text().trim()).toBe('ENOENT');
    expect(other.seen).toEqual([]);
  } finally {
    other.server.close();
    await fs.rm(spec.sandbox.egressRoot, { recursive: true, force: true });
  }
});
