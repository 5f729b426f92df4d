import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '@toolgate/testing';

/** The five services, in the order a stack starts them (the gateway last, the others first). */
const SERVICE_NAMES = [
  'journal',
  'permission-evaluator',
  'tool-executor',
  'worktree',
  'gateway',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** The variable each service reads its HTTP port from (see each service's config.ts). */
const PORT_VARIABLE: Record<ServiceName, string> = {
  gateway: 'GATEWAY_PORT',
  'permission-evaluator': 'EVALUATOR_PORT',
  'tool-executor': 'EXECUTOR_PORT',
  journal: 'JOURNAL_PORT',
  worktree: 'WORKTREE_PORT',
};

/** The repository root: this file is `test/src/support/…` under jest, `test/dist/support/…` built. */
export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/**
 * How a service process runs: from its TypeScript sources through swc (`npm start`'s way: nothing
 * to build, a slower start), or from tsc's `dist/` (the deploy image's way: build first).
 */
export type ServiceCode = 'source' | 'dist';

/** The node arguments that run a service. */
/**
 * Node's options for every service, as `npm run start:<service>` (sources) and the image's
 * NODE_OPTIONS (dist) give them: a larger young generation, so the short-lived garbage of each
 * message dies there instead of costing scavenges and promotions (see docs/benchmarks.md).
 */
const SERVICE_NODE_OPTIONS = ['--max-semi-space-size=32'];

function serviceCommand(name: ServiceName, code: ServiceCode): string[] {
  return code === 'dist'
    ? [...SERVICE_NODE_OPTIONS, path.join(REPO_ROOT, 'services', name, 'dist', 'main.js')]
    : [
        ...SERVICE_NODE_OPTIONS,
        '--require',
        path.join(REPO_ROOT, 'scripts', 'from-source.cjs'),
        path.join(REPO_ROOT, 'services', name, 'src', 'main.ts'),
      ];
}

/** How a process ended. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One service running as its own Node process (see {@link ServiceCode}). */
export interface ServiceProcess {
  readonly name: ServiceName;
  /** Its HTTP address (`/healthz`, `/readyz`, `/metrics`; the gateway's API). The port stays the same across restarts. */
  readonly url: string;
  readonly port: number;
  /** The current process id; undefined while it is not running. */
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Where its stdout and stderr go (appended across restarts). */
  readonly logFile: string;
  /** Spawns it if it is not running; does not wait for readiness (see `waitReady`). */
  start(): Promise<void>;
  /** SIGTERM (graceful: drain, finish in-flight work) and waits for the exit; SIGKILL after `timeoutMs`. */
  stop(timeoutMs?: number): Promise<ProcessExit | undefined>;
  /** SIGKILL — a crash: no drain, no ack — and waits for the exit. */
  kill(): Promise<ProcessExit | undefined>;
  /** `stop` (or `kill` with `{ crash: true }`), `start`, `waitReady`. */
  restart(options?: { crash?: boolean }): Promise<void>;
  /** Whether `/readyz` answers 200 now. */
  isReady(): Promise<boolean>;
  /** Waits until `/readyz` answers 200; fails early, with its output, if the process exits. */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Resolves when the current process exits by itself or otherwise. */
  exited(): Promise<ProcessExit>;
  /** The last few kilobytes of its output. */
  output(): string;
}

export interface ProcessStackOptions {
  /**
   * Environment of every service: NATS_URL, TOOLGATE_PREFIX, DATABASE_URL, TOOLGATE_TOKENS, … (see
   * `stackEnv`). Only this, `envFor` and PATH/HOME/LANG/TMPDIR reach the processes: the caller's
   * shell cannot change a test. Ports are the launcher's.
   */
  env: NodeJS.ProcessEnv;
  /** Additions and overrides per service. */
  envFor?: Partial<Record<ServiceName, NodeJS.ProcessEnv>>;
  /**
   * Options for node itself, before the service's entry (`--cpu-prof`, which NODE_OPTIONS does not
   * accept).
   */
  nodeArgs?: readonly string[];
  /** Which services to run (default all five). */
  services?: readonly ServiceName[];
  /** Directory for `<service>.log` (default: a new temp dir, removed when the stack stops). */
  logDir?: string;
  /** Sources (default) or the built `dist/`. */
  code?: ServiceCode;
  /** With `code: 'dist'`: build the services first with Nx (cached; default true). */
  build?: boolean;
  /** Wait until every service is ready (default true). */
  waitReady?: boolean;
  readyTimeoutMs?: number;
}

/** Several services as separate processes on one machine: the deploy shape, on loopback. */
export interface ProcessStack {
  readonly services: ReadonlyMap<ServiceName, ServiceProcess>;
  /** One service (throws if the stack does not run it). */
  service(name: ServiceName): ServiceProcess;
  /** The gateway's base URL, when the stack runs one. */
  readonly gatewayUrl: string;
  readonly logDir: string;
  /** Waits until every service is ready. */
  waitReady(timeoutMs?: number): Promise<void>;
  /**
   * Stops every service gracefully, gateway first (so no new work comes in), in parallel after it;
   * removes the log directory if the stack made it (a given `logDir` is the caller's to keep).
   */
  stop(): Promise<void>;
}

const BASE_VARIABLES = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'USER'] as const;
const DEFAULT_READY_TIMEOUT_MS = 60_000;
const OUTPUT_KEPT = 8000;

/** Every child this module started, killed if the parent exits without stopping them. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Builds the services' `dist` with Nx (cached: a no-op when nothing changed). */
async function buildServices(names: readonly ServiceName[] = SERVICE_NAMES): Promise<void> {
  const projects = names.map((n) => `@toolgate/${n}`).join(',');
  await new Promise<void>((resolve, reject) => {
    const nx = spawn(
      process.execPath,
      [
        path.join(REPO_ROOT, 'node_modules', 'nx', 'bin', 'nx.js'),
        'run-many',
        '-t',
        'build',
        '-p',
        projects,
        '--output-style=static',
      ],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-OUTPUT_KEPT));
    nx.stdout.on('data', keep);
    nx.stderr.on('data', keep);
    nx.once('error', reject);
    nx.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`building ${projects} failed:\n${output}`)),
    );
  });
}

/** Starts services as processes; see {@link ProcessStack}. */
export async function startProcessStack(options: ProcessStackOptions): Promise<ProcessStack> {
  const names = options.services ?? SERVICE_NAMES;
  const code = options.code ?? 'source';
  if (code === 'dist' && options.build !== false) await buildServices(names);
  const logDir = options.logDir ?? (await mkdtemp(path.join(tmpdir(), 'toolgate-processes-')));
  const base = Object.fromEntries(
    BASE_VARIABLES.flatMap((k) => (process.env[k] !== undefined ? [[k, process.env[k]]] : [])),
  );
  const services = new Map<ServiceName, ServiceProcess>();
  for (const name of names) {
    const port = await freePort();
    services.set(
      name,
      serviceProcess(
        name,
        port,
        code,
        path.join(logDir, `${name}.log`),
        {
          ...base,
          ...options.env,
          ...options.envFor?.[name],
          [PORT_VARIABLE[name]]: String(port),
        },
        options.nodeArgs ?? [],
      ),
    );
  }
  const stack: ProcessStack = {
    services,
    logDir,
    service(name) {
      const s = services.get(name);
      if (!s) throw new Error(`this stack does not run ${name}`);
      return s;
    },
    get gatewayUrl() {
      return stack.service('gateway').url;
    },
    async waitReady(timeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS) {
      await Promise.all([...services.values()].map((s) => s.waitReady(timeoutMs)));
    },
    async stop() {
      await services.get('gateway')?.stop();
      await Promise.all([...services.values()].map((s) => s.stop()));
      if (!options.logDir) await rm(logDir, { recursive: true, force: true });
    },
  };
  try {
    for (const s of services.values()) await s.start();
    if (options.waitReady !== false) await stack.waitReady();
  } catch (err) {
    await Promise.all([...services.values()].map((s) => s.kill()));
    throw err;
  }
  return stack;
}

function serviceProcess(
  name: ServiceName,
  port: number,
  code: ServiceCode,
  logFile: string,
  env: NodeJS.ProcessEnv,
  nodeArgs: readonly string[],
): ServiceProcess {
  const command = serviceCommand(name, code);
  const entry = command[command.length - 1]!;
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exit: Promise<ProcessExit> = Promise.resolve({ code: null, signal: null });
  let output = '';
  let log: WriteStream | undefined;

  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT);
    log?.write(chunk);
  };

  const end = async (signal: NodeJS.Signals, timeoutMs: number) => {
    const current = child;
    if (!current) return undefined;
    current.kill(signal);
    const timer = setTimeout(() => current.kill('SIGKILL'), timeoutMs);
    try {
      return await exit;
    } finally {
      clearTimeout(timer);
    }
  };

  const isReady = async () => {
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  };

  const self: ServiceProcess = {
    name,
    url,
    port,
    logFile,
    get pid() {
      return child?.pid;
    },
    get running() {
      return child !== undefined;
    },
    async start() {
      if (child) return;
      if (!existsSync(entry))
        throw new Error(
          `${entry} is missing${code === 'dist' ? ': build the services first' : ''}`,
        );
      log ??= createWriteStream(logFile, { flags: 'a' });
      log.write(`--- ${new Date().toISOString()} starting ${name} on port ${port}\n`);
      const started = spawn(process.execPath, [...nodeArgs, ...command], {
        cwd: REPO_ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = started;
      children.add(started);
      started.stdout?.on('data', keep);
      started.stderr?.on('data', keep);
      exit = new Promise<ProcessExit>((resolve) =>
        started.once('exit', (code, signal) => {
          children.delete(started);
          if (child === started) child = undefined;
          log?.write(`--- ${new Date().toISOString()} ${name} exited (${signal ?? code})\n`);
          resolve({ code, signal });
        }),
      );
    },
    stop: (timeoutMs = 30_000) => end('SIGTERM', timeoutMs),
    kill: () => end('SIGKILL', 0),
    async restart(options = {}) {
      await (options.crash ? self.kill() : self.stop());
      await self.start();
      await self.waitReady();
    },
    isReady,
    async waitReady(timeoutMs = DEFAULT_READY_TIMEOUT_MS) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (!child)
          throw new Error(
            `${name} is not running (it exited): ${output.slice(-2000) || '(no output)'}`,
          );
        if (await isReady()) return;
        if (Date.now() > deadline)
          throw new Error(`${name} was not ready within ${timeoutMs} ms: ${output.slice(-2000)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    exited: () => exit,
    output: () => output,
  };
  return self;
}
