import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ConfigError, ErrorCode, ToolgateError } from '@toolgate/contracts';
import type { Sandbox, SandboxedProcess } from '@toolgate/sandbox';
import { FILE_HELPER_PROGRAM } from './file-helper-program';

/**
 * What one file helper's mount namespace holds besides the read-only system directories: the
 * call's directory (writable or not), its read scopes read-only and its write scopes writable.
 * Nothing else of the host — no service state, key, token file or the service's `/proc`.
 */
export interface FileScope {
  readonly cwd: string;
  readonly writable: boolean;
  readonly readOnlyPaths: readonly string[];
  readonly writablePaths: readonly string[];
}

/** Why a helper refused a request (see `file-helper-program.ts`). */
export type HelperRefusal =
  { kind: 'outside' } | { kind: 'binary' } | { kind: 'errno'; errno?: string };

/** A helper's answer to one request. */
export type HelperReply = { ok: true; result: unknown } | { ok: false; error: HelperRefusal };

export interface FileScopePoolOptions {
  /** Helpers alive at once over every scope. Default 16 (the executor's in-process slots). */
  maxHelpers?: number;
  /** Helpers of one scope at once (each serves one request at a time). Default 4. */
  maxPerScope?: number;
  /** An idle helper is stopped after this long. Default 30 s. */
  idleMs?: number;
  /** Longest reply line read from a helper; a longer one kills it. Default 256 MiB. */
  maxReplyBytes?: number;
  /** The Node binary the helper runs on; it must be visible in the sandbox. Default this one. */
  node?: string;
  /**
   * A helper that has spent this long serving requests is retired when it is next released, well
   * before the sandbox's CPU limit (counted over the helper's whole life) would kill it mid-call.
   * Default half the sandbox's `cpuSeconds`.
   */
  retireAfterBusyMs?: number;
}

/** One request's bounds: the call's signal, and an optional deadline with its error. */
export interface CallBounds {
  /** The builtin's name, for the cancellation message. */
  tool: string;
  signal: AbortSignal;
  timeout?: { ms: number; error: () => ToolgateError };
}

/** How long a helper may take to answer its first ping before it is killed. */
const HELPER_BOOT_MS = 30_000;

/** The environment of a helper: nothing from the service's. */
const HELPER_ENV: Readonly<Record<string, string>> = Object.freeze({ PATH: '/usr/bin:/bin' });

/**
 * Long-lived sandboxed file helpers, pooled by scope. A call borrows an idle helper of its scope
 * (or starts one, within the bounds, or waits for one), sends one request and reads one reply. A
 * call that is cancelled or runs past its deadline kills its helper — the kill is the only way to
 * stop a regular expression mid-match — and a helper that dies is simply not reused: the next call
 * starts a fresh one. Idle helpers stop after `idleMs`; {@link close} stops them all.
 */
export class FileScopePool {
  private readonly helpers = new Set<Helper>();
  private readonly waiters: { key: string; wake: () => void }[] = [];
  private starting = new Map<string, number>();
  private closed = false;
  private readonly maxHelpers: number;
  private readonly maxPerScope: number;
  private readonly idleMs: number;
  private readonly maxReplyBytes: number;
  private readonly node: string;
  private readonly retireAfterBusyMs: number;

  constructor(
    private readonly sandbox: Sandbox,
    options: FileScopePoolOptions = {},
  ) {
    this.maxHelpers = options.maxHelpers ?? 16;
    this.maxPerScope = Math.min(options.maxPerScope ?? 4, this.maxHelpers);
    this.idleMs = options.idleMs ?? 30_000;
    this.maxReplyBytes = options.maxReplyBytes ?? 256 * 1024 * 1024;
    this.node = options.node ?? process.execPath;
    this.retireAfterBusyMs = options.retireAfterBusyMs ?? (sandbox.limits.cpuSeconds * 1000) / 2;
  }

  /**
   * A pool whose helper starts on this host: one helper is started and answers, or the service
   * refuses to start with a ConfigError (the Node binary must lie in the sandbox's system
   * directories).
   */
  static async open(sandbox: Sandbox, options: FileScopePoolOptions = {}): Promise<FileScopePool> {
    const pool = new FileScopePool(sandbox, options);
    // A directory of its own: no run may bind the temporary directory itself (the sandbox keeps
    // the egress proxies' sockets there).
    const probe = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-probe-')));
    const scope: FileScope = { cwd: probe, writable: false, readOnlyPaths: [], writablePaths: [] };
    const signal = new AbortController().signal;
    try {
      const reply = await pool.call(
        scope,
        'ping',
        {},
        {
          tool: 'file helper',
          signal,
          timeout: {
            ms: 20_000,
            error: () => new ToolgateError(ErrorCode.Timeout, 'the file helper did not answer'),
          },
        },
      );
      if (!reply.ok || reply.result !== 'pong') throw new Error('unexpected answer');
    } catch (err) {
      await pool.close();
      await fs.rm(probe, { recursive: true, force: true });
      throw new ConfigError(
        `the file builtins' sandboxed helper does not start (${(err as Error).message}): its Node binary (${pool.node}) must be in the sandbox's system directories (/usr, /bin, …)`,
        { details: { field: 'EXECUTOR_SANDBOX' } },
      );
    }
    await pool.close();
    await fs.rm(probe, { recursive: true, force: true });
    return new FileScopePool(sandbox, options);
  }

  /** Helpers alive now (for tests and the bench). */
  get size(): number {
    return this.helpers.size;
  }

  /** The host pids of the helpers alive now (bubblewrap's; for tests). */
  pids(): number[] {
    return [...this.helpers].flatMap((h) => (h.pid === undefined ? [] : [h.pid]));
  }

  /** Sends `op(args)` to a helper of `scope` and returns its reply. */
  async call(scope: FileScope, op: string, args: object, bounds: CallBounds): Promise<HelperReply> {
    const cancelled = () => new ToolgateError(ErrorCode.Cancelled, `${bounds.tool} was cancelled`);
    if (bounds.signal.aborted) throw cancelled();
    const key = await scopeKey(scope);
    const helper = await this.acquire(key, scope, bounds.signal, cancelled);
    if (bounds.signal.aborted) {
      // Cancelled while the helper booted: it stays, idle, for the next call.
      this.release(helper);
      throw cancelled();
    }
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const started = performance.now();
    try {
      const stopped = new Promise<never>((_, reject) => {
        onAbort = () => {
          void helper.kill();
          reject(cancelled());
        };
        bounds.signal.addEventListener('abort', onAbort, { once: true });
        if (bounds.timeout) {
          const { ms, error } = bounds.timeout;
          timer = setTimeout(() => {
            void helper.kill();
            reject(error());
          }, ms);
        }
      });
      return await Promise.race([helper.request(op, args), stopped]);
    } finally {
      clearTimeout(timer);
      if (onAbort) bounds.signal.removeEventListener('abort', onAbort);
      helper.busyMs += performance.now() - started;
      this.release(helper);
    }
  }

  /** Stops every helper and refuses further calls. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.wake();
    await Promise.all([...this.helpers].map((h) => h.kill()));
  }

  private async acquire(
    key: string,
    scope: FileScope,
    signal: AbortSignal,
    cancelled: () => ToolgateError,
  ): Promise<Helper> {
    for (;;) {
      if (this.closed) throw new ToolgateError(ErrorCode.Unavailable, 'the executor is stopping');
      if (signal.aborted) throw cancelled();
      for (const h of this.helpers) {
        if (h.key === key && !h.busy && h.alive) {
          h.borrow();
          return h;
        }
      }
      const ofScope =
        [...this.helpers].filter((h) => h.key === key).length + (this.starting.get(key) ?? 0);
      if (ofScope < this.maxPerScope) {
        if (this.total() >= this.maxHelpers) {
          // Make room by stopping the helper idle the longest, of another scope.
          const idle = [...this.helpers]
            .filter((h) => !h.busy)
            .sort((a, b) => a.idleSince - b.idleSince)[0];
          if (idle) this.drop(idle);
        }
        if (this.total() < this.maxHelpers) return this.start(key, scope);
      }
      await new Promise<void>((resolve) => {
        const waiter = { key, wake: () => done() };
        const done = () => {
          signal.removeEventListener('abort', done);
          const i = this.waiters.indexOf(waiter);
          if (i !== -1) this.waiters.splice(i, 1);
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        this.waiters.push(waiter);
      });
    }
  }

  private total(): number {
    let starting = 0;
    for (const n of this.starting.values()) starting += n;
    return this.helpers.size + starting;
  }

  private async start(key: string, scope: FileScope): Promise<Helper> {
    this.starting.set(key, (this.starting.get(key) ?? 0) + 1);
    try {
      const proc = await this.sandbox.spawn({
        argv: [this.node, '--disallow-code-generation-from-strings', '-e', FILE_HELPER_PROGRAM],
        cwd: scope.cwd,
        writable: scope.writable,
        readOnlyPaths: scope.readOnlyPaths,
        writablePaths: scope.writablePaths,
        // The builtins keep their own protected-path checks; the helper's view is the scope.
        protectedPaths: [],
        env: HELPER_ENV,
      });
      const helper = new Helper(key, proc, this.maxReplyBytes);
      this.helpers.add(helper);
      void proc.exited.then(() => {
        this.helpers.delete(helper);
        this.wakeOne();
      });
      helper.borrow();
      // Booted before it is handed out: Node's start-up is not charged to the call's deadline.
      const boot = setTimeout(() => void helper.kill(), HELPER_BOOT_MS);
      try {
        await helper.request('ping', {});
      } catch {
        throw new ToolgateError(ErrorCode.Unavailable, 'the file helper did not start');
      } finally {
        clearTimeout(boot);
      }
      return helper;
    } catch (err) {
      // The slot it held is free again for a call waiting on the bound.
      queueMicrotask(() => this.wakeOne());
      throw err;
    } finally {
      const n = (this.starting.get(key) ?? 1) - 1;
      if (n > 0) this.starting.set(key, n);
      else this.starting.delete(key);
    }
  }

  private release(helper: Helper): void {
    helper.busy = false;
    helper.idleSince = Date.now();
    if (!helper.alive || this.closed) {
      void helper.kill();
      return;
    }
    if (helper.busyMs >= this.retireAfterBusyMs) {
      this.drop(helper);
      return;
    }
    helper.idle(this.idleMs, () => this.drop(helper));
    this.wakeOne(helper.key);
  }

  private drop(helper: Helper): void {
    this.helpers.delete(helper);
    void helper.kill();
    this.wakeOne();
  }

  /** Wakes a waiter of `key` first (a helper of its scope is free), else the oldest one. */
  private wakeOne(key?: string): void {
    const i = key === undefined ? -1 : this.waiters.findIndex((w) => w.key === key);
    const waiter = this.waiters[i === -1 ? 0 : i];
    waiter?.wake();
  }
}

/**
 * The pool key of a scope: its mounts, and the identity of its directory — a worktree removed and
 * made again at the same path is another directory, which a helper started before cannot see.
 */
async function scopeKey(scope: FileScope): Promise<string> {
  const st = await fs.stat(scope.cwd).catch(() => undefined);
  return JSON.stringify([
    scope.cwd,
    st ? `${st.dev}:${st.ino}` : '',
    scope.writable,
    scope.readOnlyPaths,
    scope.writablePaths,
  ]);
}

/** One helper process and its line protocol; one request at a time. */
class Helper {
  busy = false;
  /** Wall time spent serving requests: at least the CPU time the helper has used, give or take. */
  busyMs = 0;
  idleSince = Date.now();
  private idleTimer: NodeJS.Timeout | undefined;
  private nextId = 0;
  private pending:
    { id: number; resolve: (r: HelperReply) => void; reject: (e: unknown) => void } | undefined;
  private parts: Buffer[] = [];
  private partBytes = 0;
  private dead = false;

  constructor(
    readonly key: string,
    private readonly proc: SandboxedProcess,
    private readonly maxReplyBytes: number,
  ) {
    proc.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    void proc.exited.then(() => {
      this.dead = true;
      this.pending?.reject(
        new ToolgateError(ErrorCode.ToolFailed, 'the file helper stopped unexpectedly'),
      );
      this.pending = undefined;
    });
  }

  get alive(): boolean {
    return !this.dead && this.proc.alive;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  borrow(): void {
    this.busy = true;
    clearTimeout(this.idleTimer);
    this.proc.ref();
  }

  idle(ms: number, stop: () => void): void {
    this.proc.unref();
    this.idleTimer = setTimeout(stop, ms);
    this.idleTimer.unref();
  }

  request(op: string, args: object): Promise<HelperReply> {
    if (!this.alive) {
      return Promise.reject(
        new ToolgateError(ErrorCode.ToolFailed, 'the file helper stopped unexpectedly'),
      );
    }
    const id = this.nextId++;
    return new Promise<HelperReply>((resolve, reject) => {
      this.pending = { id, resolve, reject };
      this.proc.stdin.write(`${JSON.stringify({ id, op, args })}\n`);
    });
  }

  kill(): Promise<void> {
    clearTimeout(this.idleTimer);
    this.dead = true;
    return this.proc.kill();
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      this.parts.push(chunk.subarray(start, nl));
      const line = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      this.partBytes = 0;
      start = nl + 1;
      this.onLine(line);
    }
    if (start < chunk.length) {
      this.parts.push(chunk.subarray(start));
      this.partBytes += chunk.length - start;
      if (this.partBytes > this.maxReplyBytes) {
        this.fail(new ToolgateError(ErrorCode.ToolFailed, 'the file helper answered too much'));
      }
    }
  }

  private onLine(line: string): void {
    const pending = this.pending;
    let reply: { id?: unknown } & HelperReply;
    try {
      reply = JSON.parse(line) as { id?: unknown } & HelperReply;
    } catch {
      this.fail(new ToolgateError(ErrorCode.ToolFailed, 'the file helper answered garbage'));
      return;
    }
    if (!pending || reply.id !== pending.id) {
      this.fail(new ToolgateError(ErrorCode.ToolFailed, 'the file helper answered out of turn'));
      return;
    }
    this.pending = undefined;
    pending.resolve(
      reply.ok ? { ok: true, result: reply.result } : { ok: false, error: reply.error },
    );
  }

  private fail(why: ToolgateError): void {
    this.pending?.reject(why);
    this.pending = undefined;
    void this.kill();
  }
}
