import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A nats-server of a test's own: loopback only, on a free port, its JetStream store in a temp
 * directory. For what the shared server on 4222 must never be put through — being killed, hung or
 * restarted. The port and the store survive a restart, so clients reconnect to the same broker
 * with the same streams.
 */
export interface NatsServerProcess {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** The JetStream store directory (kept across restarts, removed by `cleanup`). */
  readonly storeDir: string;
  /** Whether the process is running (started and not exited). */
  readonly running: boolean;
  /**
   * Starts it (again) on the same port and store; resolves once it accepts connections.
   * `jetstream` overrides the option it was created with, from this start on.
   */
  start(options?: { jetstream?: boolean }): Promise<void>;
  /** Stops it gracefully (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
  /** Kills it without a chance to clean up (SIGKILL) and waits for it to exit. */
  kill(): Promise<void>;
  /**
   * Freezes it (SIGSTOP): the sockets stay open and nothing answers, as a hung broker. Resolves
   * once every thread of it has stopped — the signal takes effect asynchronously, and a thread
   * still running could answer a request sent right after `kill` returned.
   */
  pause(): Promise<void>;
  /** Thaws a paused server (SIGCONT). */
  resume(): void;
  /** Kills it if running and removes its store. */
  cleanup(): Promise<void>;
}

export interface NatsServerOptions {
  /** Enable JetStream (default true). */
  jetstream?: boolean;
  /** Start now (default true); otherwise the port is reserved and `start()` is the caller's. */
  start?: boolean;
  /**
   * A configuration file to load (`-c`). The address and port given on the command line win over
   * the file's, so the server stays on loopback on its own port; JetStream is the file's to enable,
   * with {@link NatsServerProcess.storeDir} as its `store_dir` (create with `start: false`, write the
   * file, then `start()`).
   */
  configFile?: string;
  /**
   * The server's environment (the variables a configuration file interpolates, such as
   * passwords), instead of the test process's own; PATH is kept.
   */
  env?: Record<string, string>;
}

/** A TCP port nothing listens on right now (the kernel's pick, released at once). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/** The nats-server binary: on PATH, or where the Debian package puts it. */
function natsServerBinary(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'nats-server');
    if (dir && existsSync(candidate)) return candidate;
  }
  if (existsSync('/usr/sbin/nats-server')) return '/usr/sbin/nats-server';
  throw new Error('nats-server is not installed (Debian: apt-get install nats-server)');
}

/** Whether something accepts TCP connections on the port. */
function portAccepts(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Every child process this module started, killed if the test process exits without cleanup. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Starts (or prepares) a nats-server of the caller's own; see {@link NatsServerProcess}. */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerProcess> {
  const port = await freePort();
  const storeDir = await mkdtemp(path.join(tmpdir(), 'toolgate-nats-'));
  const binary = natsServerBinary();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';

  let jetstream = options.jetstream !== false;

  const waitForExit = async (signal: NodeJS.Signals) => {
    if (!child) return;
    child.kill(signal);
    await exited;
  };

  const server: NatsServerProcess = {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get running() {
      return child !== undefined;
    },
    async start(overrides = {}) {
      if (child) return;
      jetstream = overrides.jetstream ?? jetstream;
      output = '';
      const args = [
        ...(options.configFile ? ['-c', options.configFile] : []),
        '-a',
        '127.0.0.1',
        '-p',
        String(port),
      ];
      if (jetstream && !options.configFile) args.push('-js', '-sd', storeDir);
      const started = spawn(binary, args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(options.env ? { env: { PATH: process.env.PATH ?? '', ...options.env } } : {}),
      });
      child = started;
      children.add(started);
      const keep = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-4000);
      };
      started.stdout?.on('data', keep);
      started.stderr?.on('data', keep);
      exited = new Promise<void>((resolve) =>
        started.once('exit', () => {
          children.delete(started);
          if (child === started) child = undefined;
          resolve();
        }),
      );
      const deadline = Date.now() + 15_000;
      while (!(await portAccepts(port))) {
        if (child !== started)
          throw new Error(`nats-server on port ${port} exited at start: ${output}`);
        if (Date.now() > deadline)
          throw new Error(`nats-server on port ${port} did not accept connections: ${output}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    stop: () => waitForExit('SIGTERM'),
    kill: () => waitForExit('SIGKILL'),
    async pause() {
      if (!child?.pid) return;
      child.kill('SIGSTOP');
      await untilStopped(child.pid);
    },
    resume() {
      child?.kill('SIGCONT');
    },
    async cleanup() {
      if (child) {
        // A paused process ignores SIGTERM until it runs again; SIGKILL works either way.
        await waitForExit('SIGKILL');
      }
      await rm(storeDir, { recursive: true, force: true });
    },
  };
  if (options.start !== false) await server.start();
  return server;
}

/**
 * Waits until every thread of `pid` is stopped (state `T` in the `stat` of each task under
 * `/proc/<pid>/task`), or it is gone.
 */
async function untilStopped(pid: number, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let tasks: string[];
    try {
      tasks = await readdir(`/proc/${pid}/task`);
    } catch {
      return; // exited
    }
    const states = await Promise.all(
      tasks.map(async (task) => {
        const stat = await readFile(`/proc/${pid}/task/${task}/stat`, 'utf8').catch(() => '');
        // `pid (comm) S …`: the state follows the last ')' (a command name may hold one).
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      }),
    );
    if (states.every((s) => s === '' || s === 'T' || s === 't')) return;
    if (Date.now() > deadline)
      throw new Error(`nats-server ${pid} did not stop within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
