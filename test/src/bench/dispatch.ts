import {
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type EventLoopUtilization,
} from 'node:perf_hooks';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ApiOperation, ServiceKeys } from '@toolgate/contracts';
import type { TestNats } from '@toolgate/testing';
import {
  agent,
  ASK_TOOL,
  NOOP_TOOL,
  TENANT,
  TOKEN,
  totalSeconds,
  type BenchStack,
  type JournalWatch,
  type SubmitReply,
} from './bench-stack';
import { startCpuMeter, writeSyscalls, type CpuSpent } from './machine-cpu';
import { profiled } from './profile';
import type { PairedChains } from './raw-chain';
import {
  openLoop,
  percentile,
  phase,
  pool,
  round,
  SAMPLE_BLOCK,
  since,
  withTimeout,
} from './stats';

/** In-flight submissions in the throughput phase. */
const SUBMIT_WINDOW = 256;

export interface DispatchResult
  extends Omit<ThroughputResult, 'lastDispatchId'>, Partial<LatencyCpu> {
  p50Ms: number;
  p99Ms: number;
  transport: 'nats';
  tool: string;
  /** Untimed sequential dispatches before the latency samples (the same in quick and full runs). */
  warmupDispatches: number;
  latencySamples: number;
  /**
   * Where a sequential dispatch's time goes (p50 of each hop, ms), from the broker's timestamps of
   * its journal events and the bench's clock (the same machine): the caller's request until
   * `requested` is stored (gateway), until `decided` (evaluator), `started` (executor: checks and
   * claim), `settled` (the tool's round trip and the settlement), and the reply to the caller.
   */
  hopsP50Ms: Record<Hop, number>;
  httpP50Ms?: number;
  httpP99Ms?: number;
  httpSamples?: number;
  submitWindow: number;
  /**
   * The projection's fold rate (events/s): the journal service is stopped while the pipeline
   * settles `projectionCapacityEvents` events' worth of dispatches, started again, and timed until
   * it has folded them (see `benchProjectionCapacity`).
   */
  projectionEventsPerSec?: number;
  projectionCapacityEvents?: number;
  /**
   * CPU per dispatch of folding that backlog (every process of the stack, from once the journal has
   * started until its consumer is drained): the projection's share of `cpuMsPerDispatch`, alone —
   * what folding each event exactly once into PostgreSQL costs Toolgate, the raw chain's projection
   * consumer, which only acks, having no such work.
   */
  projectionCpuMsPerDispatch?: number;
  /** Whether `projectionEventsPerSec` ≥ `pipelineEventsPerSec`. */
  projectionKeepsUp?: boolean;
  projectionVerified: boolean;
  /**
   * The raw chain's and the guarded chain's one-at-a-time p50 and p99, each timed after every block
   * of the latency samples (all-in-one): the denominators of `p50VsRawDispatch`,
   * `p99VsRawDispatch` and their floors.
   */
  pairedRawDispatchP50Ms?: number;
  pairedRawDispatchP99Ms?: number;
  pairedGuardedChainP50Ms?: number;
  pairedGuardedChainP99Ms?: number;
  /**
   * The raw chain pipelined as the baseline's `rawChainPipelinedPerSec` is, once right before the
   * throughput phase and once right after it (all-in-one), the mean of the two: its rate, its CPU
   * per chain (the bench's process) and the broker's — the denominators of `cpuVsRawChain`,
   * `throughputVsRawChain`, `brokerCpuVsRawChain` and the CPU floor.
   */
  pairedRawChainPipelinedPerSec?: number;
  pairedRawChainCpuMsPerDispatch?: number;
  pairedRawChainBrokerCpuMsPerDispatch?: number;
  /**
   * Full runs: the p50 of the latency phase's first {@link QUICK_LATENCY_SAMPLES} samples — what a
   * quick run takes, after the same warm-up, in this run — and its ratio to `p50Ms`: how far a
   * quick run's p50 sits from the full run's, free of the host's drift between two runs.
   */
  quickSamplesP50Ms?: number;
  quickVsFullP50?: number;
  /** µs to sign one event for all its readers / to verify it once (see `benchSigning`). */
  signCostUs?: number;
  verifyCostUs?: number;
  signReaders?: number;
  ed25519VerifyUs?: number;
  toolRequestSignUs?: number;
  /**
   * Open-loop latency at a steady offered load (half the measured throughput): each dispatch is
   * sent at its scheduled time and timed from that time, so a stall counts against every call it
   * delays (no coordinated omission).
   */
  steadyP50Ms?: number;
  steadyP99Ms?: number;
  steadyOfferedPerSec?: number;
  steadySeconds?: number;
  steadyDispatches?: number;
  steadyCpuMsPerDispatch?: number;
  steadyLoopUtilization?: number;
  steadySlowestHopsP50Ms?: Record<Hop | 'sentLate', number>;
  steadyLoopDelayP99Ms?: number;
  steadyLoopDelayMaxMs?: number;
  steadyGcMaxPauseMs?: number;
  steadyGcMsPerSec?: number;
  deadLettered: number;
  /** RSS (MiB) of the services right after the throughput phase (see `memory.rssAfterMb`). */
  rssAfterThroughputMb: number;
}

export type Hop =
  | 'submitToRequested'
  | 'requestedToDecided'
  | 'decidedToStarted'
  | 'startedToSettled'
  | 'settledToReply';

export interface ApprovalsResult {
  resolveToSettleP50Ms: number;
  resolveToSettleP99Ms: number;
  resolveReplyP50Ms: number;
  samples: number;
  transport: 'nats';
}

export interface SentDispatch {
  dispatchId: string;
  /** Epoch ms (fractional) when the request was sent and its reply read. */
  sentAt: number;
  repliedAt: number;
}

/** A `performance.now()` reading as epoch milliseconds, comparable with the broker's timestamps. */
export const epochMs = (t: number) => performance.timeOrigin + t;

/** Submits no-op dispatches with fresh call ids (one counter per stack). */
export function submitter(stack: BenchStack) {
  let callSeq = 0;
  return (runId: string, wait: number, token = TOKEN) => {
    const n = ++callSeq;
    return stack.api<SubmitReply>(
      ApiOperation.SubmitDispatch,
      {
        runId,
        callId: `c${n}`,
        agent,
        tool: NOOP_TOOL,
        input: { i: n },
        ...(wait ? { wait } : {}),
      },
      30_000,
      token,
    );
  };
}

async function expectOk(reply: SubmitReply, nats: TestNats): Promise<void> {
  if (reply.status !== 'accepted' || reply.state !== 'settled' || reply.settled?.outcome !== 'ok') {
    throw new Error(
      `dispatch did not settle ok: ${JSON.stringify(reply)}; consumers: ${describeStates(await consumerStates(nats))}`,
    );
  }
}

/** Every durable consumer on the journal stream with its backlog (for diagnosis). */
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

/** Pending and unacked messages of the journal service's (projection's) consumer. */
export async function projectionBacklog(nats: TestNats): Promise<number> {
  const info = await nats.jsm.consumers.info(
    nats.subjects.journal.stream,
    nats.subjects.consumer('journal'),
  );
  return info.num_pending + info.num_ack_pending;
}

/**
 * Waits for `done`, failing with every consumer's backlog when no dispatch settles for `stallMs`
 * (a consumer loop that stopped pulling would otherwise look like a slow machine).
 */
export async function untilSettled(
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
    const count = watch.totalSettled();
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

/** Waits until the projection has folded everything; ms waited, or undefined past `maxMs`. */
export async function untilProjected(nats: TestNats, maxMs: number): Promise<number | undefined> {
  const t = performance.now();
  for (;;) {
    if ((await projectionBacklog(nats)) === 0) return since(t);
    if (since(t) > maxMs) return undefined;
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function journalCounts(nats: TestNats): Promise<{ messages: number; bytes: number }> {
  const info = await nats.jsm.streams.info(nats.subjects.journal.stream);
  return { messages: info.state.messages, bytes: info.state.bytes };
}

/** Untimed sequential dispatches before any latency sample: JIT, connections, caches. */
const WARMUP = 300;
/** Latency samples a quick run takes (a full run takes 1,000). */
const QUICK_LATENCY_SAMPLES = 200;

/** `count` untimed sequential dispatches (each checked to settle ok) of run `runId`. */
export async function warmUp(
  stack: BenchStack,
  nats: TestNats,
  count: number,
  runId: string,
  submit = submitter(stack),
): Promise<void> {
  for (let i = 0; i < count; i++) await expectOk(await submit(runId, 10_000), nats);
}

/**
 * Latency at light load: one dispatch at a time over the NATS API, waiting for its outcome, after
 * `WARMUP` untimed ones (as many in a quick run as in a full one, so both start equally warm).
 */
export async function benchLatency(
  stack: BenchStack,
  nats: TestNats,
  opts: {
    samples: number;
    runId: string;
    warmup?: number;
    profile?: string;
    raw?: boolean;
    /**
     * The raw and the guarded chain, each timed as many times as Toolgate after each of its blocks
     * of samples: the ratios' denominators taken in the same blocks (see {@link PairedChains}).
     */
    paired?: PairedChains;
  },
): Promise<{
  p50Ms: number;
  p99Ms: number;
  hopsP50Ms: Record<Hop, number>;
  /** The p50 of the first {@link QUICK_LATENCY_SAMPLES}, when more were taken. */
  quickSamplesP50Ms?: number;
  raw?: number[];
  pairedRawDispatchP50Ms?: number;
  pairedRawDispatchP99Ms?: number;
  pairedGuardedChainP50Ms?: number;
  pairedGuardedChainP99Ms?: number;
  /** Where the samples' CPU went: this process, the broker, the database, the machine. */
  cpu?: LatencyCpu;
}> {
  const submit = submitter(stack);
  await warmUp(stack, nats, opts.warmup ?? WARMUP, `${opts.runId}-warmup`, submit);
  const latencies: number[] = [];
  const sent: SentDispatch[] = [];
  const paired = opts.paired && {
    raw: [] as number[],
    guarded: opts.paired.guarded ? ([] as number[]) : undefined,
  };
  // Raw samples (the growth section's blocks) go without: each meter reads /proc twice. The
  // meters run over Toolgate's own blocks only, not the paired chains'.
  const meters = opts.raw ? undefined : blockMeters(stack);
  const run = async () => {
    const block = opts.paired ? SAMPLE_BLOCK : opts.samples;
    for (let done = 0; done < opts.samples; done += block) {
      meters?.resume();
      try {
        for (let i = done; i < Math.min(done + block, opts.samples); i++) {
          const t = performance.now();
          const reply = await submit(opts.runId, 10_000);
          const ms = since(t);
          latencies.push(ms);
          sent.push({
            dispatchId: reply.dispatchId,
            sentAt: epochMs(t),
            repliedAt: epochMs(t + ms),
          });
          await expectOk(reply, nats);
        }
        // The block's folds inside its meters, not in the paired chains' blocks.
        if (opts.paired) await untilProjected(nats, 5_000);
      } finally {
        meters?.pause();
      }
      if (!opts.paired || !paired) continue;
      const chains: [() => Promise<void>, number[]][] = [[opts.paired.raw, paired.raw]];
      if (opts.paired.guarded && paired.guarded) chains.push([opts.paired.guarded, paired.guarded]);
      for (const [chain, times] of chains) {
        for (let i = 0; i < block; i++) {
          const t = performance.now();
          await chain();
          times.push(since(t));
        }
      }
    }
  };
  // The garbage collector's pauses over the samples: what a slow one-at-a-time sample may hold.
  let gcMaxMs = 0;
  const gc = opts.raw
    ? undefined
    : new PerformanceObserver((list) => {
        for (const e of list.getEntries()) gcMaxMs = Math.max(gcMaxMs, e.duration);
      });
  gc?.observe({ entryTypes: ['gc'] });
  try {
    await (opts.profile ? profiled(opts.profile, run) : run());
  } finally {
    gc?.disconnect();
  }
  const cpu = meters?.result(opts.samples);
  // Where the slowest samples spent their time (at least 5: the p99's neighbourhood), by hop.
  const slowest = opts.raw
    ? undefined
    : await hopBreakdown(
        nats,
        opts.runId,
        sent
          .map((d, i) => ({ d, ms: latencies[i]! }))
          .sort((a, b) => b.ms - a.ms)
          .slice(0, Math.max(5, Math.ceil(sent.length / 100)))
          .map(({ d }) => d),
      );
  return {
    ...(cpu
      ? {
          cpu: {
            ...cpu,
            ...(slowest ? { latencySlowestHopsP50Ms: slowest } : {}),
            latencyGcMaxPauseMs: round(gcMaxMs),
          },
        }
      : {}),
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
    ...(paired
      ? {
          pairedRawDispatchP50Ms: round(percentile(paired.raw, 50), 3),
          pairedRawDispatchP99Ms: round(percentile(paired.raw, 99), 3),
          ...(paired.guarded
            ? {
                pairedGuardedChainP50Ms: round(percentile(paired.guarded, 50), 3),
                pairedGuardedChainP99Ms: round(percentile(paired.guarded, 99), 3),
              }
            : {}),
        }
      : {}),
    ...(latencies.length > QUICK_LATENCY_SAMPLES
      ? { quickSamplesP50Ms: round(percentile(latencies.slice(0, QUICK_LATENCY_SAMPLES), 50)) }
      : {}),
    hopsP50Ms: opts.raw ? EMPTY_HOPS : await hopBreakdown(nats, opts.runId, sent),
    ...(opts.raw ? { raw: latencies } : {}),
  };
}

/**
 * `burst` (a throughput phase) with the raw chain pipelined right before and right after it (the
 * stack idle beside it, its projection drained): the mean of the two is what the burst's ratios
 * divide by. Without `paired`, `burst` alone.
 */
export async function besidePipelined<T>(
  paired: PairedChains | undefined,
  nats: TestNats,
  burst: () => Promise<T>,
): Promise<{ result: T; paired?: ReturnType<typeof pairedMean> }> {
  if (!paired) return { result: await burst() };
  const before = await phase('raw chain pipelined', paired.rawPipelined);
  const result = await burst();
  const after = await phase('raw chain pipelined', async () => {
    await untilProjected(nats, 60_000);
    return paired.rawPipelined();
  });
  return { result, paired: pairedMean(before, after) };
}

/** The mean of the raw chain's two pipelined bursts beside a throughput phase. */
function pairedMean(
  a: Awaited<ReturnType<PairedChains['rawPipelined']>>,
  b: Awaited<ReturnType<PairedChains['rawPipelined']>>,
): Pick<
  DispatchResult,
  | 'pairedRawChainPipelinedPerSec'
  | 'pairedRawChainCpuMsPerDispatch'
  | 'pairedRawChainBrokerCpuMsPerDispatch'
> {
  return {
    pairedRawChainPipelinedPerSec: Math.round((a.perSec + b.perSec) / 2),
    pairedRawChainCpuMsPerDispatch: round((a.cpuMs + b.cpuMs) / 2, 3),
    ...(a.brokerCpuMs !== undefined && b.brokerCpuMs !== undefined
      ? { pairedRawChainBrokerCpuMsPerDispatch: round((a.brokerCpuMs + b.brokerCpuMs) / 2, 3) }
      : {}),
  };
}

/**
 * The latency meters ({@link LatencyCpu}), summed over the blocks between `resume()` and `pause()`:
 * Toolgate's own samples, not the paired chains' timed between them.
 */
function blockMeters(stack: BenchStack): {
  resume(): void;
  pause(): void;
  result(samples: number): LatencyCpu;
} {
  const allInOne = stack.shape === 'all-in-one';
  let cpuSeconds = 0;
  let writes: number | undefined = 0;
  let active = 0;
  let idle = 0;
  let wallMs = 0;
  const spent: Required<CpuSpent> = {
    brokerSeconds: 0,
    databaseSeconds: 0,
    machineBusy: 0,
    steal: 0,
  };
  const measured = new Set<keyof CpuSpent>([
    'brokerSeconds',
    'databaseSeconds',
    'machineBusy',
    'steal',
  ]);
  // Every service is in this process in the all-in-one: count their signs and verifies.
  const signatures = { signs: 0, verifies: 0, verifiesByType: {} as Record<string, number> };
  let open:
    | {
        cpu0: number;
        writes0?: number;
        elu0: EventLoopUtilization;
        t0: number;
        servers: ReturnType<typeof startCpuMeter>;
        counting?: ReturnType<typeof countSignatures>;
      }
    | undefined;
  return {
    resume() {
      open = {
        cpu0: stack.cpuSeconds(),
        writes0: writeSyscalls(),
        elu0: performance.eventLoopUtilization(),
        t0: performance.now(),
        servers: startCpuMeter(),
        ...(allInOne ? { counting: countSignatures() } : {}),
      };
    },
    pause() {
      if (!open) return;
      const { cpu0, writes0, elu0, t0, servers, counting } = open;
      open = undefined;
      counting?.stop();
      const blockMs = since(t0);
      const block = servers.stop();
      const elu = performance.eventLoopUtilization(elu0);
      const writes1 = writeSyscalls();
      cpuSeconds += stack.cpuSeconds() - cpu0;
      writes =
        writes !== undefined && writes0 !== undefined && writes1 !== undefined
          ? writes + writes1 - writes0
          : undefined;
      active += elu.active;
      idle += elu.idle;
      wallMs += blockMs;
      for (const key of measured) {
        const value = block[key];
        if (value === undefined) measured.delete(key);
        // The machine's fractions weighted by each block's length.
        else spent[key] += key === 'machineBusy' || key === 'steal' ? value * blockMs : value;
      }
      if (counting) {
        signatures.signs += counting.signs;
        signatures.verifies += counting.verifies;
        for (const [type, n] of Object.entries(counting.verifiesByType))
          signatures.verifiesByType[type] = (signatures.verifiesByType[type] ?? 0) + n;
      }
    },
    result(samples) {
      const total: CpuSpent = {};
      for (const key of measured)
        total[key] =
          key === 'machineBusy' || key === 'steal' ? spent[key] / (wallMs || 1) : spent[key];
      return {
        latencyCpuMsPerDispatch: round((cpuSeconds * 1000) / samples, 3),
        ...(writes !== undefined && allInOne
          ? { latencyWriteSyscallsPerDispatch: round(writes / samples, 1) }
          : {}),
        latencyLoopUtilization: round(active / (active + idle || 1), 3),
        // None counted: the services' keys are not this module's class (then say nothing).
        ...(signatures.signs > 0
          ? {
              latencySignsPerDispatch: round(signatures.signs / samples, 2),
              latencyVerifiesPerDispatch: round(signatures.verifies / samples, 2),
              latencyVerifiesPerDispatchByType: Object.fromEntries(
                Object.entries(signatures.verifiesByType).map(([type, n]) => [
                  type,
                  round(n / samples, 2),
                ]),
              ),
            }
          : {}),
        ...prefixed('latency', serverCpu(total, samples)),
      };
    },
  };
}

/**
 * The latency samples' CPU, per dispatch: the services' process (the bench's own, for the
 * all-in-one: the client and the worker included), the broker and the database over the same
 * span, and how busy the event loop and the machine were — one dispatch at a time, a dispatch's
 * latency is its CPU on the path plus the round trips it waits for.
 */
interface LatencyCpu {
  latencyCpuMsPerDispatch: number;
  latencyLoopUtilization: number;
  /** The process's write system calls per dispatch (all-in-one only: the split's are elsewhere). */
  latencyWriteSyscallsPerDispatch?: number;
  latencyBrokerCpuMsPerDispatch?: number;
  latencyDatabaseCpuMsPerDispatch?: number;
  latencyMachineBusyPct?: number;
  latencyStealPct?: number;
  /**
   * Journal-event signs and verifies per dispatch, counted over the samples (all-in-one: every
   * service's `ServiceKeys` in this process); the projection folds a batch after a linger, so the
   * last few samples' folds may fall outside the count. `signing.costPerDispatchUs` uses them.
   */
  latencySignsPerDispatch?: number;
  latencyVerifiesPerDispatch?: number;
  /** The same by the event's type (the subject's last token). */
  latencyVerifiesPerDispatchByType?: Record<string, number>;
  /**
   * The slowest 1% of the samples (at least 5): p50 of each hop (see `hopsP50Ms`) — which hop the
   * tail sits in; and the garbage collector's longest pause over the samples.
   */
  latencySlowestHopsP50Ms?: Record<Hop, number>;
  latencyGcMaxPauseMs?: number;
}

/**
 * Counts `ServiceKeys.signEvent` and `verifyEvent` calls until `stop()` (which restores them): a
 * counter around each, what every sign and verify still does in full.
 */
function countSignatures(): {
  signs: number;
  verifies: number;
  verifiesByType: Record<string, number>;
  stop(): void;
} {
  const proto = ServiceKeys.prototype;
  const { signEvent, verifyEvent } = proto;
  const counts = {
    signs: 0,
    verifies: 0,
    verifiesByType: {} as Record<string, number>,
    stop() {
      proto.signEvent = signEvent;
      proto.verifyEvent = verifyEvent;
    },
  };
  proto.signEvent = function (this: ServiceKeys, ...args: Parameters<typeof signEvent>) {
    counts.signs++;
    return signEvent.apply(this, args);
  };
  proto.verifyEvent = function (this: ServiceKeys, ...args: Parameters<typeof verifyEvent>) {
    counts.verifies++;
    // The journal's subjects end with the event's type.
    const type = args[0].slice(args[0].lastIndexOf('.') + 1);
    counts.verifiesByType[type] = (counts.verifiesByType[type] ?? 0) + 1;
    return verifyEvent.apply(this, args);
  };
  return counts;
}

/** `{ brokerCpuMsPerDispatch }` → `{ latencyBrokerCpuMsPerDispatch }`. */
function prefixed<T extends object>(prefix: string, fields: T): Record<string, number> {
  return Object.fromEntries(
    Object.entries(fields).map(([k, v]) => [`${prefix}${k[0]!.toUpperCase()}${k.slice(1)}`, v]),
  );
}

const EMPTY_HOPS: Record<Hop, number> = {
  submitToRequested: -1,
  requestedToDecided: -1,
  decidedToStarted: -1,
  startedToSettled: -1,
  settledToReply: -1,
};

/**
 * Reads back the journal events of `runId`'s dispatches with the broker's storage timestamps and
 * returns the p50 of each hop (see {@link DispatchResult.hopsP50Ms}).
 */
function hopBreakdown(
  nats: TestNats,
  runId: string,
  sent: readonly SentDispatch[],
): Promise<Record<Hop, number>> {
  return storedHops(
    nats.nc,
    nats.subjects.journal.stream,
    `${nats.subjects.prefix}.journal.${TENANT}.${runId}.>`,
    sent,
  );
}

/**
 * The p50 of each hop of `sent`, from the broker's storage timestamps of the events on `filter`
 * in `stream`: subjects ending `<dispatch id>.<event type>` (the journal's, the raw chain's).
 */
export async function storedHops(
  nc: NatsConnection,
  stream: string,
  filter: string,
  sent: readonly SentDispatch[],
): Promise<Record<Hop, number>> {
  const stored = new Map<string, Partial<Record<string, number>>>();
  const consumer = await jetstream(nc).consumers.get(stream, { filter_subjects: filter });
  try {
    const total = (await consumer.info(true)).num_pending;
    let seen = 0;
    while (seen < total) {
      // No more than are left: a fetch asking for more ends only when it expires (2 s idle).
      const batch = await consumer.fetch({
        max_messages: Math.min(1000, total - seen),
        expires: 2000,
      });
      for await (const m of batch) {
        seen++;
        const tokens = m.subject.split('.');
        const type = tokens[tokens.length - 1]!;
        const dispatchId = tokens[tokens.length - 2]!;
        const at = Number(BigInt(m.info.timestampNanos) / 1000n) / 1000;
        stored.set(dispatchId, { ...stored.get(dispatchId), [type]: at });
      }
    }
  } finally {
    await consumer.delete().catch(() => undefined);
  }
  const hops: Record<Hop, number[]> = {
    submitToRequested: [],
    requestedToDecided: [],
    decidedToStarted: [],
    startedToSettled: [],
    settledToReply: [],
  };
  for (const d of sent) {
    const t = stored.get(d.dispatchId);
    if (!t?.requested || !t.decided || !t.started || !t.settled) continue;
    hops.submitToRequested.push(t.requested - d.sentAt);
    hops.requestedToDecided.push(t.decided - t.requested);
    hops.decidedToStarted.push(t.started - t.decided);
    hops.startedToSettled.push(t.settled - t.started);
    hops.settledToReply.push(d.repliedAt - t.settled);
  }
  return Object.fromEntries(
    Object.entries(hops).map(([hop, v]) => [hop, v.length ? round(percentile(v, 50), 3) : -1]),
  ) as Record<Hop, number>;
}

/** The same over HTTP, for comparison (the bus is the product; HTTP is the other edge). */
async function benchHttp(
  stack: BenchStack,
  nats: TestNats,
  samples: number,
): Promise<{ httpP50Ms: number; httpP99Ms: number; httpSamples: number }> {
  const times: number[] = [];
  for (let i = -20; i < samples; i++) {
    const body = JSON.stringify({
      runId: 'http',
      callId: `h${i}`,
      agent,
      tool: NOOP_TOOL,
      input: { i },
      wait: 10_000,
    });
    const t = performance.now();
    const res = await fetch(`${stack.gatewayUrl}/v1/dispatches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body,
    });
    const reply = (await res.json()) as SubmitReply;
    if (i >= 0) times.push(since(t));
    await expectOk(reply, nats);
  }
  return {
    httpP50Ms: round(percentile(times, 50)),
    httpP99Ms: round(percentile(times, 99)),
    httpSamples: samples,
  };
}

export interface ThroughputResult {
  throughputPerSec: number;
  throughputDispatches: number;
  /** Journal events the pipeline appended per second in the throughput phase. */
  pipelineEventsPerSec: number;
  journalAvgEventBytes: number;
  /**
   * CPU time (user + system) per dispatch in the throughput phase, until the projection has folded
   * it, of every process the services, the worker and the load generator run in. Steadier than wall-clock rates on a shared machine,
   * so it is the figure to compare changes by (it leaves out the broker and the database).
   */
  cpuMsPerDispatch: number;
  /**
   * The split: `cpuMsPerDispatch` by process — `bench` (the load generator and the worker) and each
   * service's — what the capacity model's cores per 1,000 dispatches/s per service come from.
   */
  cpuMsPerDispatchByProcess?: Record<string, number>;
  /** The same until the last dispatch settled (what the projection had not folded by then is left out). */
  pipelineCpuMsPerDispatch: number;
  /**
   * The broker's and the database's CPU per dispatch over the same span as `cpuMsPerDispatch`, when
   * they run on this machine: with it, where each dispatch's CPU goes on a machine they share.
   */
  brokerCpuMsPerDispatch?: number;
  databaseCpuMsPerDispatch?: number;
  /** How busy the machine's CPUs were over that span (every process), and how much was stolen. */
  machineBusyPct?: number;
  stealPct?: number;
  /**
   * How busy this process's event loop was until the last dispatch settled (0–1): in the
   * all-in-one the one thread every service runs on, in the split the load generator's.
   */
  loopUtilization: number;
  /** Events the projection had not folded when the last dispatch settled. */
  projectionPendingAtLastSettle: number;
  /** Whether the projection had folded everything within 1 s of the last settlement. */
  projectionCaughtUp: boolean;
  /** Ms from the last `settled` until the projection's consumer had acked everything. */
  projectionCatchUpMs?: number;
  /** Present when it did not drain within the bench's wait: events still behind. */
  projectionBacklog?: number;
  journalAppendsPerDispatch: number;
  lastDispatchId: string;
}

/** `spent` per dispatch (ms) and as percentages, leaving out what could not be measured. */
function serverCpu(spent: CpuSpent, dispatches: number) {
  const perDispatch = (seconds?: number) =>
    seconds === undefined ? undefined : round((seconds * 1000) / dispatches, 3);
  const pct = (fraction?: number) =>
    fraction === undefined ? undefined : round(fraction * 100, 1);
  const fields = {
    brokerCpuMsPerDispatch: perDispatch(spent.brokerSeconds),
    databaseCpuMsPerDispatch: perDispatch(spent.databaseSeconds),
    machineBusyPct: pct(spent.machineBusy),
    stealPct: pct(spent.steal),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<
    typeof fields
  >;
}

/**
 * `count` dispatches submitted without wait, {@link SUBMIT_WINDOW} in flight, untimed, until every
 * one has settled and the projection has folded them: the concurrent paths compiled before a clock
 * starts (and, in the split, each process's own copy of the code on the path).
 */
export async function warmBurst(
  stack: BenchStack,
  nats: TestNats,
  count: number,
  runId: string,
): Promise<void> {
  const submit = submitter(stack);
  const settled = stack.watch.runSettled(runId, count);
  await pool(count, SUBMIT_WINDOW, async () => {
    await submit(runId, 0);
  });
  await untilSettled(settled, stack.watch, nats, `${count} warm-up dispatches to settle`);
  await untilProjected(nats, 30_000);
}

/**
 * Throughput: many concurrent submissions without wait, until every one has settled. A burst
 * first, untimed, so the concurrent paths (full fetch batches, hundreds of calls in flight) are
 * compiled before the clock starts, as the sequential paths were by the warm-up. Then how long
 * the projection takes to fold what is left once the last dispatch has settled.
 */
export async function benchThroughput(
  stack: BenchStack,
  nats: TestNats,
  opts: {
    dispatches: number;
    runId: string;
    drainWaitMs: number;
    profile?: string;
    /** The untimed burst first (default 500). */
    warmBurst?: number;
  },
): Promise<ThroughputResult> {
  const { watch } = stack;
  const submit = submitter(stack);
  await warmBurst(stack, nats, opts.warmBurst ?? 500, `${opts.runId}-warmup`);

  const before = await journalCounts(nats);
  const allSettled = watch.runSettled(opts.runId, opts.dispatches);
  let lastDispatchId = '';
  const t0 = performance.now();
  const byProcess0 = stack.cpuSecondsByProcess();
  const cpu0 = totalSeconds(byProcess0);
  const elu0 = performance.eventLoopUtilization();
  const servers = startCpuMeter();
  const run = async () => {
    await pool(opts.dispatches, SUBMIT_WINDOW, async () => {
      const reply = await submit(opts.runId, 0);
      if (reply.status !== 'accepted')
        throw new Error(`throughput submission not accepted: ${JSON.stringify(reply)}`);
      lastDispatchId = reply.dispatchId;
    });
    await untilSettled(allSettled, watch, nats, `${opts.dispatches} dispatches to settle`);
  };
  await (opts.profile ? profiled(opts.profile, run) : run());
  const tputMs = watch.lastSettledAt - t0;
  if (watch.failure) throw new Error(watch.failure);
  const pipelineCpuSeconds = stack.cpuSeconds() - cpu0;
  const loop = performance.eventLoopUtilization(elu0);
  const pendingAtLastSettle = await projectionBacklog(nats);
  const after = await journalCounts(nats);
  const appended = after.messages - before.messages;

  // The projection keeping up: how long after the last settlement its consumer is drained.
  const waited = await untilProjected(nats, opts.drainWaitMs);
  const catchUpMs = waited === undefined ? undefined : since(watch.lastSettledAt);
  // Up to the projection's last fold: its work is part of what a dispatch costs.
  const byProcess1 = stack.cpuSecondsByProcess();
  const cpuSeconds = totalSeconds(byProcess1) - cpu0;
  const spent = servers.stop();
  if (catchUpMs === undefined) {
    process.stderr.write(
      `bench: WARNING the journal projection did not drain within ${opts.drainWaitMs} ms; consumers: ${describeStates(await consumerStates(nats))}\n`,
    );
  }
  return {
    throughputPerSec: Math.round(opts.dispatches / (tputMs / 1000)),
    throughputDispatches: opts.dispatches,
    journalAppendsPerDispatch: round(appended / opts.dispatches),
    pipelineEventsPerSec: Math.round(appended / (tputMs / 1000)),
    journalAvgEventBytes: Math.round((after.bytes - before.bytes) / Math.max(1, appended)),
    cpuMsPerDispatch: round((cpuSeconds * 1000) / opts.dispatches, 3),
    pipelineCpuMsPerDispatch: round((pipelineCpuSeconds * 1000) / opts.dispatches, 3),
    ...(stack.shape === 'split'
      ? {
          cpuMsPerDispatchByProcess: Object.fromEntries(
            Object.entries(byProcess1).map(([name, seconds]) => [
              name,
              round(((seconds - (byProcess0[name] ?? 0)) * 1000) / opts.dispatches, 3),
            ]),
          ),
        }
      : {}),
    ...serverCpu(spent, opts.dispatches),
    loopUtilization: round(loop.utilization, 3),
    projectionPendingAtLastSettle: pendingAtLastSettle,
    projectionCaughtUp: catchUpMs !== undefined && catchUpMs <= 1000,
    ...(catchUpMs !== undefined
      ? { projectionCatchUpMs: round(catchUpMs) }
      : { projectionBacklog: await projectionBacklog(nats) }),
    lastDispatchId,
  };
}

/**
 * Latency at a steady offered load, open loop: dispatch i is sent at t0 + i / rate (waiting for
 * its outcome, as an agent does), whatever happened to the ones before, and its latency runs from
 * that scheduled time to its reply — so a stall is charged to every call it delays.
 */
export async function benchSteady(
  stack: BenchStack,
  nats: TestNats,
  opts: { ratePerSec: number; seconds: number; runId: string; profile?: string },
): Promise<SteadyResult> {
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  let gcMaxMs = 0;
  let gcTotalMs = 0;
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcMaxMs = Math.max(gcMaxMs, e.duration);
      gcTotalMs += e.duration;
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  loopDelay.enable();
  try {
    const run = () => steadyLoad(stack, nats, opts);
    const result = await (opts.profile ? profiled(opts.profile, run) : run());
    return {
      ...result,
      steadyLoopDelayP99Ms: round(loopDelay.percentile(99) / 1e6),
      steadyLoopDelayMaxMs: round(loopDelay.max / 1e6),
      steadyGcMaxPauseMs: round(gcMaxMs),
      steadyGcMsPerSec: round(gcTotalMs / opts.seconds),
    };
  } finally {
    loopDelay.disable();
    gc.disconnect();
  }
}

export interface SteadyResult {
  steadyP50Ms: number;
  steadyP99Ms: number;
  steadyOfferedPerSec: number;
  steadySeconds: number;
  steadyDispatches: number;
  /** CPU per dispatch in the steady phase, of the processes `cpuMsPerDispatch` counts. */
  steadyCpuMsPerDispatch: number;
  /**
   * How busy this process's event loop was over the steady phase (0–1): in the all-in-one the one
   * thread every service runs on, in the split the load generator's.
   */
  steadyLoopUtilization: number;
  /**
   * The slowest 1% of the steady phase's dispatches (at least 5): p50 of how late the load
   * generator sent them after their scheduled time, and of each hop (see `hopsP50Ms`) — which hop
   * a stall sits in.
   */
  steadySlowestHopsP50Ms: Record<Hop | 'sentLate', number>;
  /**
   * This process's event loop during the steady phase (the whole stack in the all-in-one, the
   * load generator alone in the split): how late a 1 ms timer ran, p99 and worst, and its garbage
   * collector's longest pause and pause time per second — what a stall of the loop is made of.
   */
  steadyLoopDelayP99Ms: number;
  steadyLoopDelayMaxMs: number;
  steadyGcMaxPauseMs: number;
  steadyGcMsPerSec: number;
}

async function steadyLoad(
  stack: BenchStack,
  nats: TestNats,
  opts: { ratePerSec: number; seconds: number; runId: string },
): Promise<Omit<SteadyResult, `steady${'LoopDelay' | 'Gc'}${string}`>> {
  const submit = submitter(stack);
  const latencies: number[] = [];
  const timed: (SentDispatch & { scheduled: number; ms: number })[] = [];
  const cpu0 = stack.cpuSeconds();
  const elu0 = performance.eventLoopUtilization();
  const total = await openLoop({ ...opts, drainMs: 60_000 }, async (scheduled, sentAt) => {
    const reply = await submit(opts.runId, 10_000);
    const repliedAt = performance.now();
    latencies.push(repliedAt - scheduled);
    timed.push({
      dispatchId: reply.dispatchId,
      scheduled: epochMs(scheduled),
      sentAt: epochMs(sentAt),
      repliedAt: epochMs(repliedAt),
      ms: repliedAt - scheduled,
    });
    await expectOk(reply, nats);
  });
  const cpuSeconds = stack.cpuSeconds() - cpu0;
  const loop = performance.eventLoopUtilization(elu0);
  // Where the slowest 1% spent their time: how late the generator sent them, then each hop.
  const slow = timed.sort((a, b) => b.ms - a.ms).slice(0, Math.max(5, Math.ceil(total / 100)));
  const slowHops = await hopBreakdown(nats, opts.runId, slow);
  return {
    steadyP50Ms: round(percentile(latencies, 50)),
    steadyP99Ms: round(percentile(latencies, 99)),
    steadyOfferedPerSec: Math.round(opts.ratePerSec),
    steadySeconds: opts.seconds,
    steadyDispatches: total,
    steadyCpuMsPerDispatch: round((cpuSeconds * 1000) / total, 3),
    steadyLoopUtilization: round(loop.utilization, 3),
    steadySlowestHopsP50Ms: {
      sentLate: round(
        percentile(
          slow.map((d) => d.sentAt - d.scheduled),
          50,
        ),
        3,
      ),
      ...slowHops,
    },
  };
}

/**
 * Journal events of a settled dispatch (and appends of a raw chain): requested, decided, started,
 * settled.
 */
export const EVENTS_PER_DISPATCH = 4;

/**
 * The projection's fold rate: the journal service is stopped, `dispatches` dispatches are settled
 * (the pipeline does not need the projection), the journal is started again and timed until its
 * consumer has folded the backlog. Events per second of backlog folded.
 */
export async function benchProjectionCapacity(
  stack: BenchStack,
  nats: TestNats,
  opts: { dispatches: number; runId: string },
): Promise<{
  projectionEventsPerSec: number;
  projectionCapacityEvents: number;
  projectionCpuMsPerDispatch: number;
}> {
  const { watch } = stack;
  const submit = submitter(stack);
  await stack.stopJournal();
  const allSettled = watch.runSettled(opts.runId, opts.dispatches);
  await pool(opts.dispatches, SUBMIT_WINDOW, async () => void (await submit(opts.runId, 0)));
  await untilSettled(allSettled, watch, nats, `${opts.dispatches} dispatches to settle`);
  if (watch.failure) throw new Error(watch.failure);
  await stack.startJournal();
  const backlog = await projectionBacklog(nats);
  const t = performance.now();
  const cpu0 = stack.cpuSeconds();
  const drained = await profiled('projection', () => untilProjected(nats, 120_000));
  if (drained === undefined) throw new Error('the restarted projection did not drain in 120 s');
  // The service's start is left out, as from the rate: a dispatch's share is its four events'.
  const cpuMsPerEvent = ((stack.cpuSeconds() - cpu0) * 1000) / backlog;
  return {
    projectionEventsPerSec: Math.round(backlog / (since(t) / 1000)),
    projectionCapacityEvents: backlog,
    projectionCpuMsPerDispatch: round(cpuMsPerEvent * EVENTS_PER_DISPATCH, 3),
  };
}

/**
 * End-to-end dispatch of a no-op remote tool (answered by a NATS worker in the bench's process)
 * through the gateway, evaluator, executor and journal: latency one at a time (and over HTTP),
 * throughput, latency at half that throughput in an open loop, and the projection's fold rate.
 */
export async function benchDispatch(
  stack: BenchStack,
  nats: TestNats,
  opts: { quick: boolean; http?: boolean; label?: string; paired?: PairedChains },
): Promise<DispatchResult> {
  const label = opts.label ?? '';
  const latency = await phase('latency (warm-up and samples)', () =>
    benchLatency(stack, nats, {
      samples: opts.quick ? QUICK_LATENCY_SAMPLES : 1000,
      runId: `${label}latency`,
      profile: `${label}latency`,
      ...(opts.paired ? { paired: opts.paired } : {}),
    }),
  );
  const http =
    opts.http === false
      ? undefined
      : await phase('latency over HTTP', () => benchHttp(stack, nats, opts.quick ? 30 : 300));
  const { result: tput, paired: pairedPipelined } = await besidePipelined(opts.paired, nats, () =>
    phase('throughput', () =>
      benchThroughput(stack, nats, {
        dispatches: opts.quick ? 2000 : 10_000,
        runId: `${label}tput`,
        drainWaitMs: opts.quick ? 5_000 : 60_000,
        profile: `${label}throughput`,
      }),
    ),
  );
  await opts.paired?.close();
  const rssAfterThroughputMb = round(stack.rssMb(), 1);
  const steadySeconds = opts.quick ? 3 : 20;
  const steady = await phase('steady load', () =>
    benchSteady(stack, nats, {
      ratePerSec: tput.throughputPerSec / 2,
      seconds: steadySeconds,
      runId: `${label}steady`,
      profile: `${label}steady`,
    }),
  );
  await phase('projection drain', () => untilProjected(nats, 60_000));
  const capacity = await phase('projection fold rate', () =>
    benchProjectionCapacity(stack, nats, {
      dispatches: opts.quick ? 600 : 5000,
      runId: `${label}capacity`,
    }),
  );
  const last = await stack
    .api<{ events: { event: { type: string } }[] }>(ApiOperation.GetDispatch, {
      dispatchId: tput.lastDispatchId,
    })
    .catch(() => undefined);
  const deadLettered = (await nats.jsm.streams.info(nats.subjects.deadLetter.stream)).state
    .messages;
  const { lastDispatchId: _, ...throughput } = tput;
  return {
    p50Ms: latency.p50Ms,
    p99Ms: latency.p99Ms,
    transport: 'nats',
    tool: 'remote no-op (NATS worker in the bench process replying {ok:true,result:null})',
    warmupDispatches: WARMUP,
    latencySamples: opts.quick ? QUICK_LATENCY_SAMPLES : 1000,
    ...(latency.quickSamplesP50Ms !== undefined
      ? {
          quickSamplesP50Ms: latency.quickSamplesP50Ms,
          quickVsFullP50: round(latency.quickSamplesP50Ms / latency.p50Ms, 3),
        }
      : {}),
    hopsP50Ms: latency.hopsP50Ms,
    ...latency.cpu,
    ...(latency.pairedRawDispatchP50Ms !== undefined
      ? {
          pairedRawDispatchP50Ms: latency.pairedRawDispatchP50Ms,
          pairedRawDispatchP99Ms: latency.pairedRawDispatchP99Ms,
          pairedGuardedChainP50Ms: latency.pairedGuardedChainP50Ms,
          pairedGuardedChainP99Ms: latency.pairedGuardedChainP99Ms,
        }
      : {}),
    ...pairedPipelined,
    ...http,
    ...throughput,
    submitWindow: SUBMIT_WINDOW,
    ...steady,
    ...capacity,
    projectionKeepsUp: capacity.projectionEventsPerSec >= throughput.pipelineEventsPerSec,
    projectionVerified: last?.events.length === 4,
    deadLettered,
    rssAfterThroughputMb,
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
  const warm = 30;
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
