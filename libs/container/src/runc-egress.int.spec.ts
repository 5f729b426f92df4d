/**
 * A runc container's egress listener lives in the executor, which every call shares: a container
 * that opens connection after connection to 127.0.0.1:3128 (and never closes them) must not pin
 * the executor's descriptors beyond what the proxy holds (a third red team pinned 1,126 with a
 * thousand). The container's namespace is stood in for by one bubblewrap makes (loopback up); the
 * hook's handshake is the real one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EGRESS_MAX_CONNECTIONS, findExecutable } from '@toolgate/sandbox';
import { RuncEgress } from './runc-egress';

let dir: string;
let holder: ChildProcess;
let pid: string;
let proxy: net.Server;
const held: net.Socket[] = [];

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-runc-egress-'));
  // The call's proxy: takes what it takes, as the executor's does, and answers nothing.
  proxy = net.createServer((s) => {
    held.push(s);
    s.on('error', () => undefined);
  });
  proxy.maxConnections = EGRESS_MAX_CONNECTIONS;
  await new Promise<void>((resolve) => proxy.listen(path.join(dir, 'proxy.sock'), resolve));
  holder = spawn(
    'bwrap',
    ['--unshare-net', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', 'sleep', '120'],
    { stdio: 'ignore' },
  );
  const children = `/proc/${holder.pid}/task/${holder.pid}/children`;
  for (let i = 0; i < 200 && !pid; i++) {
    pid = (await fs.readFile(children, 'utf8').catch(() => '')).trim().split(' ')[0] ?? '';
    if (!pid) await new Promise((r) => setTimeout(r, 10));
  }
});

afterAll(async () => {
  holder?.kill('SIGKILL');
  for (const s of held) s.destroy();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await fs.rm(dir, { recursive: true, force: true });
});

/** The hook's side of the handshake: the PID, then the executor's answer. */
function handshake(socket: string, line: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(socket, () => s.write(line));
    let answer = '';
    s.on('data', (d) => (answer += d));
    s.on('close', () => resolve(answer));
    s.on('error', () => resolve(answer));
  });
}

it('holds no more of the container’s connections than the proxy does', async () => {
  expect(pid).toMatch(/^\d+$/);
  const nsenter = (await findExecutable('nsenter'))!;
  const node = await fs.realpath(process.execPath);
  const bundle = await fs.mkdtemp(path.join(dir, 'bundle-'));
  const egress = await RuncEgress.open(bundle, path.join(dir, 'proxy.sock'), { nsenter, node });
  try {
    expect(await handshake(egress.hookSocket, `${pid}\n`)).toBe('go\n');
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    // Inside the namespace: 400 connections, each kept half-open whatever the other side does.
    const flood = spawn(
      nsenter,
      [
        `--net=/proc/${pid}/ns/net`,
        '--',
        node,
        '-e',
        `let open = 0, done = 0;
for (let i = 0; i < 400; i++) {
  const s = require('net').connect({ port: 3128, host: '127.0.0.1', allowHalfOpen: true });
  s.on('connect', () => open++); s.on('error', () => undefined);
  s.on('close', () => { if (++done === 400) process.exit(0); });
}
setTimeout(() => { console.log(open); }, 1500);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const connected = await new Promise<number>((resolve) =>
      flood.stdout!.once('data', (d) => resolve(Number(String(d).trim()))),
    );
    expect(connected).toBeGreaterThan(0);
    const grown = fds() - before;
    flood.kill('SIGKILL');
    // In this process: the listener's 64, their 64 connections to the proxy, and the stand-in
    // proxy's 64 ends of those — not one set per connection the container opened.
    expect(grown).toBeLessThanOrEqual(3 * EGRESS_MAX_CONNECTIONS + 16);
    expect(held.length).toBeLessThanOrEqual(EGRESS_MAX_CONNECTIONS);
  } finally {
    await egress.close();
  }
});
