import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, headers, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { loadAllInOneOptions, startAllInOne, type AllInOne } from '@toolgate/all-in-one';
import { ApiOperation, type ApiReply, type Subjects } from '@toolgate/contracts';
import type { TokenGrant } from '@toolgate/gateway';
import { NATS_URL, type TestNats, type TestSchema } from '@toolgate/testing';
import { removeWorkdir, stackEnv } from '../support/test-stack';
import { percentile, pool, round, since, withTimeout } from './stats';

const TENANT = 'bench';
const TOKEN = 'bench-admin-token-0123456789abcdef';
const GRANT: TokenGrant = {
  token: TOKEN,
  tenant: TENANT,
  scopes: ['admin', 'dispatch', 'approve'],
  identity: 'bench',
};
const NOOP_TOOL = 'bench_noop';
const ASK_TOOL = 'bench_ask';
const agent = { agentType: 'bench', label: 'bench' };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** In-flight submissions in the throughput phase. */
const SUBMIT_WINDOW = 256;

export interface DispatchResult {
  p50Ms: number;
  p99Ms: number;
  throughputPerSec: number;
  journalAppendsPerDispatch: number;
  transport: 'nats';
  tool: string;
  latencySamples: number;
  httpP50Ms: number;
  httpP99Ms: number;
  httpSamples: number;
  throughputDispatches: number;
  submitWindow: number;
  journalAvgEventBytes: number;
  projectionPendingAtLastSettle: number;
  projectionCaughtUp: boolean;
  /** Events folded per second while draining the backlog left at the last settlement. */
  projectionEventsPerSec?: number;
  /** Present when the projection drained: ms from the last `settled` until its consumer had acked everything. */
  projectionCatchUpMs?: number;
  /** Present when it did not drain within the wait: events still behind. */
  projectionBacklog?: number;
  projectionVerified: boolean;
  deadLettered: number;
}

export interface ApprovalsResult {
  resolveToSettleP50Ms: number;
  resolveToSettleP99Ms: number;
  resolveReplyP50Ms: number;
  samples: number;
  transport: 'nats';
}

interface Settled {
  outcome: string;
  at: number;
}

/**
 * Core-NATS watches on the journal's `settled` and `suspended` subjects (JetStream publishes reach
 * core subscribers too), so the bench sees each outcome the moment the broker has it.
 */
class JournalWatch {
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
        const [, , , runId = '', dispatchId = ''] = msg.subject.split('.');
        const event = JSON.parse(decoder.decode(msg.data)) as {
          outcome: string;
          error?: { code: string; message: string };
        };
        if (event.outcome !== 'ok') {
          this.failure ??= `dispatch ${dispatchId} of run ${runId} settled ${event.outcome}: ${event.error?.code} ${event.error?.message}`;
        }
        this.lastSettledAt = at;
        const n = (this.settledByRun.get(runId) ?? 0) + 1;
        this.settledByRun.set(runId, n);
        this.waiters.get(dispatchId)?.({ outcome: event.outcome, at });
        this.waiters.delete(dispatchId);
        this.checkRun(runId);
      },
    });
    const suspended = nc.subscribe(subjects.journal.ofType('suspended'), {
      callback: (err, msg) => {
        if (err) return;
        const [, , , runId = '', dispatchId = ''] = msg.subject.split('.');
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

/** The whole stack in this process, a no-op remote tool worker and a client on the bench prefix. */
export class BenchStack {
  private constructor(
    readonly all: AllInOne,
    readonly nc: NatsConnection,
    readonly subjects: Subjects,
    private readonly worker: NatsConnection,
    readonly watch: JournalWatch,
    private readonly workdir: string,
  ) {}

  static async start(nats: TestNats, schema: TestSchema): Promise<BenchStack> {
    const workdir = await mkdtemp(path.join(tmpdir(), 'tg-bench-stack-'));
    let all: AllInOne | undefined;
    let worker: NatsConnection | undefined;
    try {
      all = await startAllInOne({
        ...loadAllInOneOptions(stackEnv(nats, schema, workdir, [GRANT])),
        logger: false,
      });
      // A team's worker: its own connection, a queue group per tool, answering at once.
      worker = await connect({ servers: NATS_URL, name: `${nats.prefix}-bench-worker` });
      const reply = encoder.encode(JSON.stringify({ ok: true, result: null }));
      for (const name of [NOOP_TOOL, ASK_TOOL]) {
        const { subject, queue } = nats.subjects.remoteTool(TENANT, name);
        worker.subscribe(subject, {
          queue,
          callback: (err, msg) => void (err || msg.respond(reply)),
        });
      }
      await worker.flush();
      const stack = new BenchStack(
        all,
        nats.nc,
        nats.subjects,
        worker,
        new JournalWatch(nats.nc, nats.subjects),
        workdir,
      );
      for (const name of [NOOP_TOOL, ASK_TOOL]) {
        await stack.api(ApiOperation.RegisterTool, {
          tool: {
            name,
            description: 'Does nothing and returns null (bench).',
            parameters: { type: 'object', properties: { i: { type: 'integer' } } },
            policy: { executor: 'remote', risk: 'read' },
          },
        });
      }
      await stack.api(ApiOperation.PutPolicy, {
        document: { engine: { ask: [{ tool: ASK_TOOL }] } },
      });
      return stack;
    } catch (err) {
      await worker?.close().catch(() => undefined);
      await all?.stop().catch(() => undefined);
      await removeWorkdir(workdir);
      throw err;
    }
  }

  /** One gateway operation over NATS request/reply; throws on a typed error. */
  async api<T = unknown>(operation: ApiOperation, body: unknown, timeout = 30_000): Promise<T> {
    const h = headers();
    h.set('Authorization', `Bearer ${TOKEN}`);
    const msg = await this.nc.request(
      this.subjects.api(operation),
      encoder.encode(JSON.stringify(body)),
      { timeout, headers: h },
    );
    const reply = JSON.parse(decoder.decode(msg.data)) as ApiReply<T>;
    if (!reply.ok)
      throw new Error(`${operation} failed: ${reply.error.code}: ${reply.error.message}`);
    return reply.data;
  }

  async stop(): Promise<void> {
    this.watch.close();
    try {
      await this.all.stop();
    } finally {
      await this.worker.close().catch(() => undefined);
      await removeWorkdir(this.workdir);
    }
  }
}

interface SubmitReply {
  dispatchId: string;
  status: string;
  state: string;
  settled?: { outcome: string; error?: { code: string; message: string } };
}

async function expectOk(reply: SubmitReply, nats: TestNats): Promise<void> {
  if (reply.status !== 'accepted' || reply.state !== 'settled' || reply.settled?.outcome !== 'ok') {
    throw new Error(
      `dispatch did not settle ok: ${JSON.stringify(reply)}; consumers: ${describeStates(await consumerStates(nats))}`,
    );
  }
}

/** Every durable consumer on the journal stream with its backlog (for the projection and for diagnosis). */
async function consumerStates(
  nats: TestNats,
): Promise<{ name: string; pending: number; ackPending: number; delivered: number }[]> {
  const states = [];
  for await (const ci of nats.jsm.consumers.list(nats.subjects.journal.stream)) {
    states.push({
      name: ci.name,
      pending: ci.num_pending,
      ackPending: ci.num_ack_pending,
      delivered: ci.delivered.stream_seq,
    });
  }
  return states;
}

const describeStates = (states: Awaited<ReturnType<typeof consumerStates>>) =>
  states
    .map(
      (c) =>
        `${c.name}: ${c.pending} pending, ${c.ackPending} unacked, delivered up to seq ${c.delivered}`,
    )
    .join('; ');

/** Sum of pending and unacked messages over the journal service's consumers. */
async function projectionBacklog(nats: TestNats): Promise<number> {
  const mine = nats.subjects.consumer('journal');
  return (await consumerStates(nats))
    .filter((c) => c.name === mine || c.name.startsWith(`${mine}-`))
    .reduce((sum, c) => sum + c.pending + c.ackPending, 0);
}

/**
 * Waits for `done`, failing with every consumer's backlog when no dispatch settles for `stallMs`
 * (a consumer loop that stopped pulling would otherwise look like a slow machine).
 */
async function untilSettled(
  done: Promise<void>,
  watch: JournalWatch,
  nats: TestNats,
  what: string,
  stallMs = 20_000,
): Promise<void> {
  let finished = false;
  void done.then(() => (finished = true));
  let lastCount = -1;
  let lastChange = Date.now();
  while (!finished) {
    await Promise.race([done, new Promise((r) => setTimeout(r, 250))]);
    const count = [...watch.settledByRun.values()].reduce((a, b) => a + b, 0);
    if (count !== lastCount) {
      lastCount = count;
      lastChange = Date.now();
    } else if (!finished && Date.now() - lastChange > stallMs) {
      throw new Error(
        `stalled waiting for ${what}: nothing settled for ${stallMs / 1000} s; consumers: ${describeStates(await consumerStates(nats))}`,
      );
    }
  }
}

async function journalCounts(nats: TestNats): Promise<{ messages: number; bytes: number }> {
  const info = await nats.jsm.streams.info(nats.subjects.journal.stream);
  return { messages: info.state.messages, bytes: info.state.bytes };
}

/**
 * End-to-end dispatch of a no-op remote tool (answered by an in-process NATS worker) through the
 * gateway, evaluator, executor and journal, all in this process.
 */
export async function benchDispatch(
  stack: BenchStack,
  nats: TestNats,
  opts: { quick: boolean },
): Promise<DispatchResult> {
  const { watch } = stack;
  let callSeq = 0;
  const submit = (runId: string, wait: number) =>
    stack.api<SubmitReply>(ApiOperation.SubmitDispatch, {
      runId,
      callId: `c${++callSeq}`,
      agent,
      tool: NOOP_TOOL,
      input: { i: callSeq },
      ...(wait ? { wait } : {}),
    });

  // Warm-up: JIT, connections, the evaluator's compiled chain, the journal's prepared statements.
  for (let i = 0; i < 50; i++) await expectOk(await submit('warmup', 10_000), nats);

  // Latency at light load: one dispatch at a time over the NATS API, waiting for its outcome.
  const latencySamples = opts.quick ? 200 : 1000;
  const latencies: number[] = [];
  for (let i = 0; i < latencySamples; i++) {
    const t = performance.now();
    const reply = await submit('latency', 10_000);
    latencies.push(since(t));
    await expectOk(reply, nats);
  }

  // The same over HTTP, for comparison (the bus is the product; HTTP is the other edge).
  const httpSamples = opts.quick ? 100 : 300;
  const httpTimes: number[] = [];
  for (let i = -20; i < httpSamples; i++) {
    const body = JSON.stringify({
      runId: 'http',
      callId: `h${++callSeq}`,
      agent,
      tool: NOOP_TOOL,
      input: { i: callSeq },
      wait: 10_000,
    });
    const t = performance.now();
    const res = await fetch(`${stack.all.gateway.url}/v1/dispatches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body,
    });
    const reply = (await res.json()) as SubmitReply;
    if (i >= 0) httpTimes.push(since(t));
    await expectOk(reply, nats);
  }

  // Throughput: many concurrent submissions without wait, until every one has settled. A burst
  // first, untimed, so the concurrent paths (full fetch batches, hundreds of calls in flight) are
  // compiled before the clock starts, as the sequential paths were by the warm-up above.
  const warmBurst = 500;
  const warmSettled = watch.runSettled('tput-warmup', warmBurst);
  await pool(warmBurst, SUBMIT_WINDOW, async () => {
    await submit('tput-warmup', 0);
  });
  await untilSettled(warmSettled, watch, nats, `${warmBurst} warm-up dispatches to settle`);
  const dispatches = opts.quick ? 3000 : 10_000;
  const before = await journalCounts(nats);
  const allSettled = watch.runSettled('tput', dispatches);
  let lastId = '';
  const t0 = performance.now();
  await pool(dispatches, SUBMIT_WINDOW, async () => {
    const reply = await submit('tput', 0);
    if (reply.status !== 'accepted')
      throw new Error(`throughput submission not accepted: ${JSON.stringify(reply)}`);
    lastId = reply.dispatchId;
  });
  await untilSettled(allSettled, watch, nats, `${dispatches} dispatches to settle`);
  const tputMs = watch.lastSettledAt - t0;
  if (watch.failure) throw new Error(watch.failure);
  const pendingAtLastSettle = await projectionBacklog(nats);
  const after = await journalCounts(nats);
  const appended = after.messages - before.messages;

  // The projection keeping up: how long after the last settlement its consumers are drained. It is
  // an extra, not a goal of BENCH.md: when it does not drain in time the bench says so and goes on.
  let catchUpMs: number | undefined =
    pendingAtLastSettle > 0 ? undefined : since(watch.lastSettledAt);
  let backlog = pendingAtLastSettle;
  const waitStart = performance.now();
  const deadline = Date.now() + (opts.quick ? 5_000 : 90_000);
  while (catchUpMs === undefined && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
    backlog = await projectionBacklog(nats);
    if (backlog === 0) catchUpMs = since(watch.lastSettledAt);
  }
  // Events the projection folded per second while the bench waited for it (nothing else was running).
  const foldedPerSec = (pendingAtLastSettle - backlog) / (since(waitStart) / 1000);
  if (catchUpMs === undefined) {
    process.stderr.write(
      `bench: WARNING the journal projection did not drain (${backlog} events behind); consumers: ${describeStates(await consumerStates(nats))}\n`,
    );
  }
  const last = await stack
    .api<{ events: { event: { type: string } }[] }>(ApiOperation.GetDispatch, {
      dispatchId: lastId,
    })
    .catch(() => undefined);
  const deadLettered = (await nats.jsm.streams.info(nats.subjects.deadLetter.stream)).state
    .messages;

  return {
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
    throughputPerSec: Math.round(dispatches / (tputMs / 1000)),
    journalAppendsPerDispatch: round(appended / dispatches),
    transport: 'nats',
    tool: 'remote no-op (in-process NATS worker replying {ok:true,result:null})',
    latencySamples,
    httpP50Ms: round(percentile(httpTimes, 50)),
    httpP99Ms: round(percentile(httpTimes, 99)),
    httpSamples,
    throughputDispatches: dispatches,
    submitWindow: SUBMIT_WINDOW,
    journalAvgEventBytes: Math.round((after.bytes - before.bytes) / Math.max(1, appended)),
    projectionPendingAtLastSettle: pendingAtLastSettle,
    projectionCaughtUp: catchUpMs !== undefined,
    ...(pendingAtLastSettle > 0 ? { projectionEventsPerSec: Math.round(foldedPerSec) } : {}),
    ...(catchUpMs !== undefined
      ? { projectionCatchUpMs: round(catchUpMs) }
      : { projectionBacklog: backlog }),
    projectionVerified: last?.events.length === 4,
    deadLettered,
  };
}

/**
 * Approvals: a policy that asks for `bench_ask`; N calls are dispatched and parked, then resolved
 * one at a time (allow, naming dispatch and run) over the NATS API. The figure is the time from
 * sending the resolve request to seeing the dispatch's `settled` event.
 */
export async function benchApprovals(
  stack: BenchStack,
  nats: TestNats,
  opts: { quick: boolean },
): Promise<ApprovalsResult> {
  const { watch } = stack;
  const warm = 10;
  const samples = opts.quick ? 50 : 300;
  const total = warm + samples;
  const runId = 'approvals';
  await pool(total, 64, async (i) => {
    const reply = await stack.api<SubmitReply>(ApiOperation.SubmitDispatch, {
      runId,
      callId: `a${i}`,
      agent,
      tool: ASK_TOOL,
      input: { i },
    });
    if (reply.status !== 'accepted')
      throw new Error(`approval dispatch not accepted: ${JSON.stringify(reply)}`);
  });
  await withTimeout(
    watch.runSuspended(runId, total),
    60_000,
    `${total} dispatches to be suspended`,
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}; consumers: ${describeStates(await consumerStates(nats))}`);
  });
  if (watch.settledByRun.get(runId))
    throw new Error(
      'an ask dispatch settled before it was resolved: the ask policy was not applied',
    );

  const parked = [...watch.suspended.entries()].filter(([, s]) => s.runId === runId);
  const settleTimes: number[] = [];
  const replyTimes: number[] = [];
  for (const [n, [dispatchId, { approvalKey }]] of parked.entries()) {
    const settled = watch.settled(dispatchId);
    const t = performance.now();
    const replied = stack
      .api(ApiOperation.ResolveApproval, { key: approvalKey, decision: 'allow', dispatchId, runId })
      .then(() => since(t));
    const s = await withTimeout(
      settled,
      30_000,
      `dispatch ${dispatchId} to settle after its approval`,
    );
    const replyMs = await replied;
    if (s.outcome !== 'ok') throw new Error(`approved dispatch ${dispatchId} settled ${s.outcome}`);
    if (n >= warm) {
      settleTimes.push(s.at - t);
      replyTimes.push(replyMs);
    }
  }
  if (watch.failure) throw new Error(watch.failure);
  return {
    resolveToSettleP50Ms: round(percentile(settleTimes, 50)),
    resolveToSettleP99Ms: round(percentile(settleTimes, 99)),
    resolveReplyP50Ms: round(percentile(replyTimes, 50)),
    samples: settleTimes.length,
    transport: 'nats',
  };
}
