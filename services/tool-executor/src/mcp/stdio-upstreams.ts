import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { ErrorCode, ToolgateError, type McpStdioUpstream } from '@toolgate/contracts';
import type { Sandbox, SandboxedProcess } from '@toolgate/sandbox';
import { mcpClientSdk } from './mcp-client-sdk';
import { SandboxedStdioTransport } from './sandboxed-stdio-transport';

const MIB = 1024 * 1024;

/** What {@link StdioUpstreams} bounds. */
export interface StdioUpstreamLimits {
  /** Starts of one server's process within `restartWindowMs` before it is refused. Default 5. */
  maxStarts?: number;
  restartWindowMs?: number;
  /** How long a start (the sandbox and MCP's connect) may take. Default 30 s. */
  startTimeoutMs?: number;
  /** The longest JSON-RPC message a server may send. Default 4 MiB. */
  maxMessageBytes?: number;
}

/** The environment a stdio server starts with, before its registration's `env`. */
const BASE_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: '/usr/local/bin:/usr/bin:/bin',
  HOME: '/tmp',
  TMPDIR: '/tmp',
  LANG: 'C.UTF-8',
});

interface Running {
  readonly client: Client;
  readonly proc: SandboxedProcess;
  /** The empty scope made for it, removed when it stops. */
  readonly scratch?: string;
}

/**
 * The stdio MCP servers behind Toolgate: one long-lived process per server and tenant, started in
 * the executor's sandbox (bubblewrap: no host secrets or service state in view, no network unless
 * the registration allows it, its scope the directory the registration names or an empty one of
 * its own) at its first use, and started again at the next use after it died — at most
 * `maxStarts` times a window, so a server that crashes on start is refused (`unavailable`), not
 * restarted in a loop. {@link close} kills them all.
 */
export class StdioUpstreams {
  private readonly running = new Map<string, Promise<Running>>();
  private readonly starts = new Map<string, number[]>();
  private readonly maxStarts: number;
  private readonly windowMs: number;
  private readonly startTimeoutMs: number;
  private readonly maxMessageBytes: number;
  private closed = false;

  constructor(
    private readonly sandbox: Sandbox,
    limits: StdioUpstreamLimits = {},
  ) {
    this.maxStarts = limits.maxStarts ?? 5;
    this.windowMs = limits.restartWindowMs ?? 60_000;
    this.startTimeoutMs = limits.startTimeoutMs ?? 30_000;
    this.maxMessageBytes = limits.maxMessageBytes ?? 4 * MIB;
  }

  /** The connected client of `upstream`'s process for `tenant`, started when none runs. */
  async client(upstream: McpStdioUpstream, tenant: string): Promise<Client> {
    return (await this.connection(upstream, tenant)).client;
  }

  /** Stops `upstream`'s process for `tenant` (a later use starts a fresh one). */
  async drop(upstream: McpStdioUpstream, tenant: string): Promise<void> {
    const key = keyOf(upstream, tenant);
    const running = this.running.get(key);
    this.running.delete(key);
    await running?.then((r) => r.client.close()).catch(() => undefined);
  }

  /** Kills every process and removes the scopes made for them. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.running.values()];
    this.running.clear();
    await Promise.all(all.map((r) => r.then((x) => x.client.close()).catch(() => undefined)));
  }

  private connection(upstream: McpStdioUpstream, tenant: string): Promise<Running> {
    if (this.closed) {
      return Promise.reject(new ToolgateError(ErrorCode.Unavailable, 'the executor is stopping'));
    }
    const key = keyOf(upstream, tenant);
    let running = this.running.get(key);
    if (!running) {
      this.admitStart(key, upstream.name);
      running = this.start(upstream, key);
      running.catch(() => {
        if (this.running.get(key) === running) this.running.delete(key);
      });
      this.running.set(key, running);
    }
    return running;
  }

  /** Counts a start, refusing one past the bound. */
  private admitStart(key: string, server: string): void {
    const now = Date.now();
    const recent = (this.starts.get(key) ?? []).filter((t) => now - t < this.windowMs);
    if (recent.length >= this.maxStarts) {
      this.starts.set(key, recent);
      throw new ToolgateError(
        ErrorCode.Unavailable,
        `the MCP server ${server} stopped ${recent.length} times within ${Math.round(this.windowMs / 1000)} s: not started again yet`,
        { retryable: true, details: { server } },
      );
    }
    recent.push(now);
    this.starts.set(key, recent);
  }

  /**
   * Starts the process and connects: `server/discover` first (2026-07-28); a server that exits on
   * it or answers nothing usable (SDKs that refuse anything before `initialize`) is spoken to the
   * 2025 way, in a fresh process.
   */
  private async start(upstream: McpStdioUpstream, key: string): Promise<Running> {
    const first = await this.spawn(upstream, key);
    try {
      return { ...first, client: await this.connect(first.proc, 'auto') };
    } catch {
      await first.proc.kill();
    }
    const second = await this.spawn(upstream, key);
    try {
      return { ...second, client: await this.connect(second.proc, 'legacy') };
    } catch (err) {
      await second.proc.kill();
      throw this.unavailable(upstream, err);
    }
  }

  private async spawn(
    upstream: McpStdioUpstream,
    key: string,
  ): Promise<{ proc: SandboxedProcess; scratch?: string }> {
    const { command } = upstream;
    const scratch = command.cwd
      ? undefined
      : await mkdtemp(path.join(os.tmpdir(), `toolgate-mcp-${upstream.name}-`));
    const cleanup = () =>
      scratch ? rm(scratch, { recursive: true, force: true }) : Promise.resolve();
    let proc: SandboxedProcess;
    try {
      proc = await this.sandbox.spawn({
        argv: command.argv,
        cwd: command.cwd ?? scratch!,
        network: command.network ?? false,
        env: { ...BASE_ENV, ...command.env },
        limits: {
          ...(command.limits?.cpuSeconds ? { cpuSeconds: command.limits.cpuSeconds } : {}),
          ...(command.limits?.memoryMb ? { addressSpaceBytes: command.limits.memoryMb * MIB } : {}),
          ...(command.limits?.processes ? { processes: command.limits.processes } : {}),
          ...(command.limits?.openFiles ? { openFiles: command.limits.openFiles } : {}),
        },
      });
    } catch (err) {
      await cleanup();
      throw this.unavailable(upstream, err);
    }
    // Gone (a crash, its CPU limit, a kill): forgotten, so the next use starts a fresh one.
    void proc.exited.then(async () => {
      const current = this.running.get(key);
      if (current && (await current.then((r) => r.proc === proc).catch(() => false))) {
        this.running.delete(key);
      }
      await cleanup();
    });
    return { proc, ...(scratch ? { scratch } : {}) };
  }

  private async connect(proc: SandboxedProcess, mode: 'auto' | 'legacy'): Promise<Client> {
    const { Client } = mcpClientSdk();
    const client = new Client(
      { name: 'toolgate', version: '0.1.0' },
      {
        versionNegotiation: { mode, probe: { timeoutMs: this.startTimeoutMs } },
      },
    );
    await client.connect(new SandboxedStdioTransport(proc, this.maxMessageBytes), {
      timeout: this.startTimeoutMs,
    });
    return client;
  }

  private unavailable(upstream: McpStdioUpstream, cause: unknown): ToolgateError {
    // Its message may be the server's own words; only the name and the code leave.
    return new ToolgateError(
      ErrorCode.Unavailable,
      `the MCP server ${upstream.name} did not start`,
      { cause, retryable: true, details: { server: upstream.name } },
    );
  }
}

function keyOf(upstream: McpStdioUpstream, tenant: string): string {
  return `${upstream.name}\u0000${tenant}`;
}
