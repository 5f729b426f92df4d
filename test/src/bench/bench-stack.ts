import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, headers, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { loadAllInOneOptions, startAllInOne, type AllInOne } from '@toolgate/all-in-one';
import { InboxRequests } from '@toolgate/bus';
import {
  ApiOperation,
  parseJournalSubject,
  type ApiReply,
  type Subjects,
} from '@toolgate/contracts';
import type { TokenGrant } from '@toolgate/gateway';
import { startJournal } from '@toolgate/journal';
import { setupTelemetry } from '@toolgate/telemetry';
import { NATS_URL, type TestNats, type TestSchema } from '@toolgate/testing';
import { startProcessStack, type ProcessStack } from '../support/process-stack';
import { removeWorkdir, stackEnv } from '../support/test-stack';
import { procCpuSeconds } from './machine-cpu';

export const TENANT = 'bench';
export const TOKEN = 'bench-admin-token-0123456789abcdef';
const GRANT: TokenGrant = {
  token: TOKEN,
  tenant: TENANT,
  scopes: ['admin', 'dispatch', 'approve'],
  identity: 'bench',
};
export const NOOP_TOOL = 'bench_noop';
export const ASK_TOOL = 'bench_ask';
export const agent = { agentType: 'bench', label: 'bench' };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How the services run: all five in this process (`npm start`), or one process each (Kubernetes). */
export type StackShape = 'all-in-one' | 'split';

/** The token of the bench's i-th extra tenant (see `extraTenants`). */
export function tenantToken(i: number): { tenant: string; token: string } {
  const n = String(i).padStart(4, '0');
  return { tenant: `bench-t${n}`, token: `bench-tenant-token-${n}-0123456789` };
}

export interface SubmitReply {
  dispatchId: string;
  status: string;
  state: string;
  settled?: { outcome: string; error?: { code: string; message: string } };
}

interface Settled {
  outcome: string;
  at: number;
}

/**
 * Core-NATS watches on the journal's `settled` and `suspended` subjects (JetStream publishes reach
 * core subscribers too), so the bench sees each outcome the moment the broker has it.
 */
export class JournalWatch {
  private readonly subs: Subscription[];
  private readonly waiters = new Map<string, (s: Settled) => void>();
  readonly settledByRun = new Map<string, number>();
  readonly suspended = new Map<string, { approvalKey: string; runId: string }>();
  lastSettledAt = 0;
  private readonly runWaiters = new Map<string, { count: number; resolve: () => void }>();
  /** A settlement that was not `ok`: the bench fails on it rather than time an error path. */
  failure: string | undefined;

  constructor(nc: NatsConnection, subjects: Subjects) {
    const settled = nc.subscribe(subjects.journal.ofType('settled'), {
      callback: (err, msg) => {
        if (err) return;
        const at = performance.now();
        const { runId = '', key: dispatchId = '' } = parseJournalSubject(msg.subject) ?? {};
        // Only a failure is parsed: the load generator shares a thread with the services.
        const text = decoder.decode(msg.data);
        let outcome = 'ok';
        if (!text.includes('"outcome":"ok"')) {
          const event = JSON.parse(text) as {
            outcome: string;
            error?: { code: string; message: string };
          };
          outcome = event.outcome;
          this.failure ??= `dispatch ${dispatchId} of run ${runId} settled ${event.outcome}: ${event.error?.code} ${event.error?.message}`;
        }
        this.lastSettledAt = at;
        const n = (this.settledByRun.get(runId) ?? 0) + 1;
        this.settledByRun.set(runId, n);
        this.waiters.get(dispatchId)?.({ outcome, at });
        this.waiters.delete(dispatchId);
        this.checkRun(runId);
      },
    });
    const suspended = nc.subscribe(subjects.journal.ofType('suspended'), {
      callback: (err, msg) => {
        if (err) return;
        const { runId = '', key: dispatchId = '' } = parseJournalSubject(msg.subject) ?? {};
        const event = JSON.parse(decoder.decode(msg.data)) as { approvalKey: string };
        this.suspended.set(dispatchId, { approvalKey: event.approvalKey, runId });
        this.checkRun(`suspended:${runId}`);
      },
    });
    this.subs = [settled, suspended];
  }

  /** Resolves when `dispatchId` settles (register before causing it). */
  settled(dispatchId: string): Promise<Settled> {
    return new Promise((resolve) => this.waiters.set(dispatchId, resolve));
  }

  /** Resolves once `count` dispatches of `runId` have settled. */
  runSettled(runId: string, count: number): Promise<void> {
    return this.untilCount(runId, count);
  }

  /** Resolves once `count` dispatches of `runId` are suspended. */
  runSuspended(runId: string, count: number): Promise<void> {
    return this.untilCount(`suspended:${runId}`, count);
  }

  /** Dispatches settled so far, over every run. */
  totalSettled(): number {
    let n = 0;
    for (const v of this.settledByRun.values()) n += v;
    return n;
  }

  private untilCount(key: string, count: number): Promise<void> {
    return new Promise((resolve) => {
      this.runWaiters.set(key, { count, resolve });
      this.checkRun(key);
    });
  }

  private checkRun(key: string): void {
    const w = this.runWaiters.get(key);
    if (!w) return;
    const n = key.startsWith('suspended:')
      ? [...this.suspended.values()].filter((s) => s.runId === key.slice('suspended:'.length))
          .length
      : (this.settledByRun.get(key) ?? 0);
    if (n >= w.count) {
      this.runWaiters.delete(key);
      w.resolve();
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

export interface BenchStackOptions {
  shape: StackShape;
  /** Extra tenants with a token each (`tenantToken(i)`), dispatch and admin scopes. */
  extraTenants?: number;
  /** Environment added to every service. */
  env?: NodeJS.ProcessEnv;
  /** Node options of every service of a split stack (`--cpu-prof` for its profiles). */
  nodeArgs?: readonly string[];
  /** The broker the worker and the client connect to (default `NATS_URL`; give `env.NATS_URL` too). */
  servers?: string[];
}

/**
 * Toolgate on the bench's prefix and schema — all five services in this process, or each in a
 * process of its own from its sources, as `npm run start:<service>` runs it — with a no-op remote
 * tool answered by a worker on its own connection, and a client on the bench prefix.
 */
export class BenchStack {
  private requests: InboxRequests | undefined;

  private constructor(
    readonly shape: StackShape,
    private readonly all: AllInOne | undefined,
    private readonly processes: ProcessStack | undefined,
    readonly nc: NatsConnection,
    readonly subjects: Subjects,
    private readonly worker: NatsConnection,
    readonly watch: JournalWatch,
    private readonly workdir: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  static async start(
    nats: TestNats,
    schema: TestSchema,
    options: BenchStackOptions,
  ): Promise<BenchStack> {
    const workdir = await mkdtemp(path.join(tmpdir(), 'tg-bench-stack-'));
    const grants: TokenGrant[] = [GRANT];
    for (let i = 0; i < (options.extraTenants ?? 0); i++) {
      const { tenant, token } = tenantToken(i);
      grants.push({ token, tenant, scopes: ['admin', 'dispatch'], identity: tenant });
    }
    const env = { ...stackEnv(nats, schema, workdir, grants), ...options.env };
    let all: AllInOne | undefined;
    let processes: ProcessStack | undefined;
    let worker: NatsConnection | undefined;
    let client: NatsConnection | undefined;
    try {
      if (options.shape === 'all-in-one') {
        // As the services' mains do (`runUntilSignalled`), so the bench measures what `npm start` runs.
        setupTelemetry({ serviceName: 'toolgate-all-in-one' });
        all = await startAllInOne({ ...loadAllInOneOptions(env), logger: false });
      } else {
        processes = await startProcessStack({
          env,
          readyTimeoutMs: 180_000,
          ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}),
        });
      }
      // Without async traces (as the services connect): in the all-in-one the load generator and
      // the worker share this thread with the services, so their overhead is kept as small as a
      // real client's.
      worker = await connect({
        servers: options.servers ?? NATS_URL,
        name: `${nats.prefix}-bench-worker`,
        noAsyncTraces: true,
      });
      client = await connect({
        servers: options.servers ?? NATS_URL,
        name: `${nats.prefix}-bench-client`,
        noAsyncTraces: true,
      });
      // A team's worker: its own connection, a queue group per tool, answering at once — for
      // every tenant (the wildcard stands for the tenant token).
      const reply = encoder.encode(JSON.stringify({ ok: true, result: null }));
      for (const name of [NOOP_TOOL, ASK_TOOL]) {
        const { subject, queue } = nats.subjects.remoteTool(TENANT, name);
        worker.subscribe(subject.replace(`.${TENANT}.`, '.*.'), {
          queue,
          callback: (err, msg) => void (err || msg.respond(reply)),
        });
      }
      await worker.flush();
      const stack = new BenchStack(
        options.shape,
        all,
        processes,
        client,
        nats.subjects,
        worker,
        new JournalWatch(client, nats.subjects),
        workdir,
        env,
      );
      await stack.registerTools(TOKEN);
      await stack.api(ApiOperation.PutPolicy, {
        document: { engine: { ask: [{ tool: ASK_TOOL }] } },
      });
      return stack;
    } catch (err) {
      await worker?.close().catch(() => undefined);
      await client?.close().catch(() => undefined);
      await all?.stop().catch(() => undefined);
      await processes?.stop().catch(() => undefined);
      await removeWorkdir(workdir);
      throw err;
    }
  }

  /** The gateway's HTTP address. */
  get gatewayUrl(): string {
    return this.all ? this.all.gateway.url : this.processes!.gatewayUrl;
  }

  /** Registers the bench's tools for the tenant of `token`. */
  async registerTools(token: string): Promise<void> {
    for (const name of [NOOP_TOOL, ASK_TOOL]) {
      await this.api(
        ApiOperation.RegisterTool,
        {
          tool: {
            name,
            description: 'Does nothing and returns null (bench).',
            parameters: { type: 'object', properties: { i: { type: 'integer' } } },
            policy: { executor: 'remote', risk: 'read' },
          },
        },
        30_000,
        token,
      );
    }
  }

  /** One gateway operation over NATS request/reply; throws on a typed error. */
  async api<T = unknown>(
    operation: ApiOperation,
    body: unknown,
    timeout = 30_000,
    token = TOKEN,
  ): Promise<T> {
    const h = headers();
    h.set('Authorization', `Bearer ${token}`);
    // One inbox for every request (as the services' own clients do): `nc.request` allocates a
    // timer and two errors per call, on the thread the all-in-one's services run on.
    this.requests ??= new InboxRequests(this.nc);
    const msg = await this.requests.request(
      this.subjects.api(operation),
      encoder.encode(JSON.stringify(body)),
      { timeoutMs: timeout, headers: h },
    );
    const reply = JSON.parse(decoder.decode(msg.data)) as ApiReply<T>;
    if (!reply.ok)
      throw new Error(`${operation} failed: ${reply.error.code}: ${reply.error.message}`);
    return reply.data;
  }

  /**
   * CPU seconds (user + system) used so far by the services, the worker and the load generator:
   * this process, and in a split stack the services' processes too.
   */
  cpuSeconds(): number {
    return totalSeconds(this.cpuSecondsByProcess());
  }

  /**
   * CPU seconds so far by process: `bench` (this process: the load generator and the worker, and
   * in the all-in-one every service) and, in a split stack, each service's process by its name.
   */
  cpuSecondsByProcess(): Record<string, number> {
    const own = process.cpuUsage();
    const by: Record<string, number> = { bench: (own.user + own.system) / 1e6 };
    for (const [name, s] of this.processes?.services ?? []) {
      if (s.pid !== undefined) by[name] = procCpuSeconds(s.pid);
    }
    return by;
  }

  /** Resident memory of the services (MiB): this process, or the sum of the services' processes. */
  rssMb(): number {
    if (!this.processes) return process.memoryUsage().rss / 2 ** 20;
    let kb = 0;
    for (const s of this.processes.services.values()) {
      if (s.pid !== undefined) kb += procRssKb(s.pid);
    }
    return kb / 1024;
  }

  /**
   * Stops the journal service (the projection stops folding; the journal stream keeps every
   * event), to let a backlog build up.
   */
  async stopJournal(): Promise<void> {
    if (this.processes) {
      await this.processes.service('journal').stop();
      return;
    }
    await this.all!.journal.stop();
  }

  /** Starts the journal service again on the same configuration (see `stopJournal`). */
  async startJournal(): Promise<void> {
    if (this.processes) {
      const journal = this.processes.service('journal');
      await journal.start();
      await journal.waitReady(180_000);
      return;
    }
    // The all-in-one stops whichever journal its field holds when it stops.
    const options = loadAllInOneOptions(this.env);
    this.all!.journal = await startJournal({ config: options.journal, logger: false });
  }

  async stop(): Promise<void> {
    this.watch.close();
    this.requests?.close();
    try {
      await this.all?.stop();
      await this.processes?.stop();
    } finally {
      await this.worker.close().catch(() => undefined);
      await this.nc.close().catch(() => undefined);
      await removeWorkdir(this.workdir);
    }
  }
}

function procRssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** The sum of {@link BenchStack.cpuSecondsByProcess}: every process's CPU seconds together. */
export function totalSeconds(byProcess: Record<string, number>): number {
  return Object.values(byProcess).reduce((sum, seconds) => sum + seconds, 0);
}
