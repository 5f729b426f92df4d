import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { EGRESS_MAX_CONNECTIONS, EGRESS_PORT } from '@toolgate/sandbox';

/**
 * Egress for a runc container that may use the network: the container keeps its own network
 * namespace (loopback only), and connections to 127.0.0.1:EGRESS_PORT in it reach the caller's
 * proxy on a Unix socket — as a sandboxed subprocess's do, without a bridge in the container
 * (the image need not hold one). A `createRuntime` hook (runc, root, on the host, once the
 * container's namespaces exist and before its command starts) hands this process the container's
 * PID over a socket in the bundle; a short-lived helper entered into the container's network
 * namespace (`nsenter --net`) opens the listening socket there and passes it back over its IPC
 * channel, and this process accepts on it and pipes each connection to the proxy. Only then does
 * the hook let runc start the command: no connection comes too early, and nothing of ours runs
 * inside the container.
 */

/**
 * The hook, run by runc with the container's state on stdin: sends the PID to the socket named
 * after `--`, and succeeds when the answer is `go` (any other ending fails the hook, and runc does
 * not start the command). Fixed text.
 */
const HOOK_SCRIPT = `'use strict';
const net = require('net');
let state = '';
process.stdin.on('data', (d) => (state += d)).on('end', () => {
  const { pid } = JSON.parse(state);
  const s = net.connect(process.argv[1], () => s.write(pid + '\\n'));
  let answer = '';
  s.on('data', (d) => (answer += d));
  s.on('end', () => process.exit(answer.trim() === 'go' ? 0 : 1));
  s.on('error', () => process.exit(1));
});
`;

/** The helper in the container's network namespace: listens, passes the socket back, exits. */
const LISTEN_SCRIPT = `'use strict';
const server = require('net').createServer();
server.on('error', () => process.exit(1));
server.listen(Number(process.argv[1]), '127.0.0.1', () =>
  process.send('listening', server, () => process.exit(0)));
`;

/** The OCI hook entry of a container with egress (see {@link RuncEgress}). */
export function egressHook(node: string, socket: string) {
  return { path: node, args: [node, '-e', HOOK_SCRIPT, '--', socket], timeout: 10 };
}

/** How long the helper may take to listen in the namespace. */
const HELPER_TIMEOUT_MS = 10_000;

/**
 * One container's egress, from before `runc run` until the container has stopped: the hook's
 * socket in the bundle, then the listener in the container's namespace. {@link close} ends both
 * and every piped connection.
 */
export class RuncEgress {
  private readonly sockets = new Set<net.Socket>();
  private listener: net.Server | undefined;
  /** Set by {@link close}: a listener the helper hands over after that is closed at once. */
  private closed = false;

  private readonly hookServer: net.Server;

  private constructor(
    /** The hook's socket, named in the container's `createRuntime` hook. */
    readonly hookSocket: string,
    proxy: string,
    tools: { nsenter: string; node: string },
  ) {
    // The hook sends the container's PID on one line, and waits for `go` (or anything else).
    this.hookServer = net.createServer((hook) => {
      hook.on('error', () => undefined);
      let line = '';
      let answered = false;
      hook.on('data', (d) => {
        if (answered) return;
        line += d;
        if (line.length > 32) return void hook.destroy();
        if (!line.includes('\n')) return;
        answered = true;
        const pid = line.slice(0, line.indexOf('\n')).trim();
        if (!/^[1-9]\d{0,9}$/.test(pid)) return void hook.end('no\n');
        this.listenIn(pid, proxy, tools).then(
          () => hook.end('go\n'),
          () => hook.end('no\n'),
        );
      });
    });
  }

  /** Listens for the hook at `<bundle>/egress-hook.sock`; connections go to `proxy`. */
  static async open(
    bundle: string,
    proxy: string,
    tools: { nsenter: string; node: string },
  ): Promise<RuncEgress> {
    const egress = new RuncEgress(path.join(bundle, 'egress-hook.sock'), proxy, tools);
    await new Promise<void>((resolve, reject) => {
      egress.hookServer.once('error', reject);
      egress.hookServer.listen(egress.hookSocket, () => resolve());
    });
    await fs.chmod(egress.hookSocket, 0o600);
    return egress;
  }

  /** Opens the listener in the network namespace of `pid` and pipes what it accepts to `proxy`. */
  private async listenIn(
    pid: string,
    proxy: string,
    tools: { nsenter: string; node: string },
  ): Promise<void> {
    if (this.listener) throw new Error('one container, one listener');
    const helper = spawn(
      tools.nsenter,
      [
        `--net=/proc/${pid}/ns/net`,
        '--',
        tools.node,
        '-e',
        LISTEN_SCRIPT,
        '--',
        String(EGRESS_PORT),
      ],
      { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: {} },
    );
    const listener = await new Promise<net.Server>((resolve, reject) => {
      const timer = setTimeout(() => {
        helper.kill('SIGKILL');
        reject(new Error('the egress helper did not listen in time'));
      }, HELPER_TIMEOUT_MS);
      helper.once('message', (message, handle) => {
        clearTimeout(timer);
        if (message === 'listening' && handle instanceof net.Server) resolve(handle);
        else reject(new Error('the egress helper sent no listener'));
      });
      helper.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      // 'close', not 'exit': it comes once the IPC channel has been read to its end.
      helper.once('close', (code) => {
        clearTimeout(timer);
        reject(new Error(`the egress helper exited (${code})`));
      });
    });
    if (this.closed) {
      // The container ended (or runc gave up on the hook) while the helper worked.
      listener.close();
      throw new Error('the container is gone');
    }
    this.listener = listener;
    // Accepted in this process, which every call shares: as many at once as the proxy takes, and
    // each side gone with the other (a half-closed one would hold a descriptor for nothing).
    listener.maxConnections = EGRESS_MAX_CONNECTIONS;
    listener.on('connection', (client) => {
      const upstream = net.connect(proxy);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
      }
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
  }

  /** Stops listening (in the namespace and for the hook) and ends every piped connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    await Promise.all(
      [this.listener, this.hookServer].map(
        (server) => server && new Promise<void>((resolve) => server.close(() => resolve())),
      ),
    );
  }
}
