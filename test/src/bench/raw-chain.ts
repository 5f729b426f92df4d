import { performance } from 'node:perf_hooks';
import { type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { NATS_URL } from '@toolgate/testing';
import { addJournalLikeStream } from './baseline';
import { epochMs, EVENTS_PER_DISPATCH, storedHops, type Hop, type SentDispatch } from './dispatch';
import { procCpuSeconds, startCpuMeter, writeSyscalls } from './machine-cpu';
import {
  guards,
  PAYLOAD,
  ROLES,
  serveRole,
  spawnRoles,
  type ChainSpec,
  type Guards,
  type RoleProcesses,
  type ServedRole,
} from './raw-chain-roles';
import { BENCH_CONNECTION, openLoop, percentile, pool, round, SAMPLE_BLOCK, since } from './stats';

/**
 * A dispatch's message pattern in raw NATS, with no Toolgate code on it: what the transport alone
 * costs one dispatch on this machine, in this run — the floor under `dispatch.p50Ms`.
 */
export interface RawDispatchResult {
  /** One chain at a time, the client's request to its reply. */
  rawDispatchP50Ms: number;
  rawDispatchP99Ms: number;
  rawDispatchSamples: number;
  /** The chain's p50 per hop, as `dispatch.hopsP50Ms` (the same broker timestamps). */
  rawDispatchHopsP50Ms: Record<Hop, number>;
  /** This process's CPU per chain (every connection below is in it, as in the all-in-one). */
  rawDispatchCpuMsPerDispatch: number;
  /** This process's write system calls per chain (Linux). */
  rawDispatchWriteSyscallsPerDispatch?: number;
  /** The broker's CPU per chain, when it runs on this machine. */
  rawDispatchBrokerCpuMsPerDispatch?: number;
  /**
   * The same chain one at a time with the work every dispatch must do on its path added to it
   * (signatures, their checks, the tool request's signature, the gateway's read-back; see
   * {@link Guards}), in blocks alternating with the raw chain's samples: a floor under
   * `dispatch.p50Ms` and `p99Ms` (`dispatch.p50FloorVsRawDispatch` divides it by `rawDispatchP50Ms`).
   */
  guardedChainP50Ms: number;
  guardedChainP99Ms: number;
  /**
   * The same chains pipelined, {@link PIPELINE_WINDOW} in flight as in the dispatch throughput
   * phase (after an untimed burst): chains per second until the last reply.
   */
  rawChainPipelinedPerSec: number;
  rawChainPipelinedChains: number;
  /**
   * This process's CPU per pipelined chain (every role is in it, the client and the worker too, as
   * `dispatch.cpuMsPerDispatch` counts the load generator and the worker), until the projection
   * consumer has acked every event: what `dispatch.cpuVsRawChain` divides by.
   */
  rawChainCpuMsPerDispatch: number;
  /** The broker's CPU per pipelined chain over the same span, when it runs on this machine. */
  rawChainBrokerCpuMsPerDispatch?: number;
  /**
   * This process's CPU per chain of the projection role alone: a fresh consumer reading and acking
   * a chain's four events from a backlog (as `dispatch.projectionCpuMsPerDispatch` is taken) — the
   * part of `rawChainCpuMsPerDispatch` that Toolgate's projection replaces.
   */
  rawChainProjectionCpuMsPerDispatch: number;
  /**
   * The same chains at half `rawChainPipelinedPerSec` in an open loop, as `dispatch.steady…` offers
   * half the dispatch throughput: p50 and p99 from each chain's scheduled time, and each ÷
   * `rawDispatchP50Ms` — what the steady goals ask of Toolgate (`steadyP50VsOneAtATime` ≤ 2,
   * `steadyP99VsOneAtATime` ≤ 6), asked of the raw chain; its CPU per chain (this process, until
   * the last reply) and how busy this process's event loop was.
   */
  rawChainSteadyP50Ms: number;
  rawChainSteadyP99Ms: number;
  rawChainSteadyOfferedPerSec: number;
  rawChainSteadyCpuMsPerDispatch: number;
  rawChainSteadyLoopUtilization: number;
  rawChainSteadyP50VsOneAtATime: number;
  rawChainSteadyP99VsOneAtATime: number;
  /**
   * With `split`: the raw and the guarded chain with each role in a process of its own, as the
   * split shape runs each service (the client and the worker in this process, as its load
   * generator and worker are), one at a time in the same alternate blocks — what the shape alone
   * costs a chain, and the floor under `dispatch.split.p50Ms` (`split.p50FloorVsRawDispatch`).
   */
  rawSplitChainP50Ms?: number;
  rawSplitChainP99Ms?: number;
  guardedSplitChainP50Ms?: number;
  guardedSplitChainP99Ms?: number;
  /**
   * The raw chain in that layout pipelined as `rawChainPipelinedPerSec` is, and its CPU per chain
   * (this process and the roles' four, until the projection role has acked every event): the
   * shape's own rate and CPU (`split.shape…VsRawChain`) and its part of `split.cpuFloor…`.
   */
  rawSplitChainPipelinedPerSec?: number;
  rawSplitChainCpuMsPerDispatch?: number;
  rawSplitChainBrokerCpuMsPerDispatch?: number;
  /**
   * The guarded chain in that layout pipelined so (`split.guardedChainThroughputVsRawChain`): a
   * reference for `dispatch.split.throughputPerSec`, not a bound (the split batches what its roles
   * do one event at a time).
   */
  guardedSplitChainPipelinedPerSec?: number;
}

/** Untimed chains first: in quick and full runs alike. */
const WARMUP = 100;
/**
 * Untimed dispatches (chains), pipelined, before anything of the split (of a split chain) is timed:
 * each of its processes compiles its own copy of the code on the path.
 */
export const SPLIT_WARM_BURST = 1_500;
/** In flight at once in the pipelined figure: the dispatch throughput phase's window. */
const PIPELINE_WINDOW = 256;

/**
 * Each service of the all-in-one has a connection of its own, and so does each role here:
 *
 * client ─request→ "gateway" ─append requested→ stream ─deliver→ "evaluator" ─append decided→
 * stream ─deliver→ "executor" ─append started (and read settled beside it)→ ─request→ "worker"
 * ─reply→ "executor" ─append settled (a read beside it)→ stream ─core delivery→ "gateway" ─reply→
 * client; and a "projection" consumer reads and acks every event.
 *
 * Every append expects the subject to be empty (`lastSubjectSequence: 0`) and carries a message
 * id, as the journal's appends do; consumers are durable pull consumers with explicit acks, acked
 * after the handler's append. Same waits on the broker as a dispatch, none of its work.
 */
export async function benchRawDispatch(
  jsm: JetStreamManager,
  prefix: string,
  opts: { quick: boolean; split?: boolean },
): Promise<RawDispatchResult> {
  const opened: OpenChain[] = [];
  let splitOpening: Promise<{ raw: OpenChain; guarded: OpenChain; pids: number[] }> | undefined;
  let roles: RoleProcesses | undefined;
  const openNamed = async (name: string, options?: Parameters<typeof openChain>[3]) => {
    const chain = await openChain(jsm, `${prefix}_${name}`, `${prefix}.${name}`, options);
    opened.push(chain);
    return chain;
  };
  try {
    // The split shape's layout (`opts.split`: each role in a process of its own, serving both
    // chains) starts while the chains in this process warm up; nothing is timed before both are.
    splitOpening = opts.split
      ? (async () => {
          const raw = await openNamed('rawsplit', { roles: 'elsewhere' });
          const guarded = await openNamed('rawsplitguarded', {
            guard: guards(),
            roles: 'elsewhere',
          });
          const chains = [raw, guarded];
          roles = await spawnRoles(
            chains.map((c) => c.spec),
            (stream, err) => chains.find((c) => c.stream === stream)?.refuse(err),
          );
          return { raw, guarded, pids: roles.pids };
        })()
      : undefined;
    splitOpening?.catch(() => undefined);
    const raw = await openNamed('rawchain');
    const guarded = await openNamed('rawguarded', { guard: guards() });
    for (let i = 0; i < WARMUP; i++) {
      await raw.chain();
      await guarded.chain();
    }
    const split = await splitOpening;
    // Each role's process compiles its own copy of the chain's code: a pipelined burst of each
    // split chain first (one at a time after 100 chains, their CPU per chain read ~2 × what it
    // read after 10,000, 2026-12-07).
    for (const chain of split ? [split.raw, split.guarded] : []) {
      await pool(
        SPLIT_WARM_BURST,
        PIPELINE_WINDOW,
        async (i) => void (await chain.chain(`warm${i}`)),
      );
      await chain.projected();
    }
    for (let i = 0; i < (split ? WARMUP : 0); i++) {
      await split?.raw.chain();
      await split?.guarded.chain();
    }
    const others = [guarded, ...(split ? [split.raw, split.guarded] : [])];
    // One chain at a time, each chain in turn in blocks (the host's speed drifts within a run),
    // the plain chain's CPU and writes metered block by block.
    const samples = opts.quick ? 200 : 500;
    const times: number[] = [];
    const othersTimes = others.map((): number[] => []);
    const sent: SentDispatch[] = [];
    let cpuMs = 0;
    let brokerCpuMs: number | undefined;
    let writes: number | undefined = 0;
    for (let done = 0; done < samples; done += SAMPLE_BLOCK) {
      const block = Math.min(SAMPLE_BLOCK, samples - done);
      const cpu = meter();
      const writes0 = writeSyscalls();
      for (let i = done; i < done + block; i++) {
        const t = performance.now();
        await raw.chain(`d${i}`);
        const ms = since(t);
        times.push(ms);
        sent.push({ dispatchId: `d${i}`, sentAt: epochMs(t), repliedAt: epochMs(t + ms) });
      }
      const writes1 = writeSyscalls();
      const blockCpu = cpu.stop(1);
      cpuMs += blockCpu.cpuMs;
      if (blockCpu.brokerCpuMs !== undefined)
        brokerCpuMs = (brokerCpuMs ?? 0) + blockCpu.brokerCpuMs;
      writes =
        writes !== undefined && writes0 !== undefined && writes1 !== undefined
          ? writes + writes1 - writes0
          : undefined;
      for (const [c, chain] of others.entries()) {
        // Quick: the split's chains every other block (100 samples, as the split's own).
        const splitChain = c > 0;
        if (splitChain && opts.quick && (done / SAMPLE_BLOCK) % 2 === 1) continue;
        for (let i = done; i < done + block; i++) {
          const t = performance.now();
          await chain.chain(`d${i}`);
          othersTimes[c]!.push(since(t));
        }
      }
    }
    const [guardedTimes, splitTimes, guardedSplitTimes] = othersTimes;
    await guarded.close();

    const plain = await pipelined(raw, 'p', opts);
    const pipelinedPerSec = plain.perSec;
    const pipelinedCpu = plain.cpu;
    const chains = plain.chains;
    const splitPipelined = split
      ? await pipelined(split.raw, 's', { ...opts, pids: split.pids })
      : undefined;
    const guardedSplitPipelined = split
      ? await pipelined(split.guarded, 'g', { ...opts, pids: split.pids })
      : undefined;
    await roles?.close();

    // Half that rate in an open loop, as the dispatch's steady phase offers half its throughput
    // (quick: 2 s, as the split's; its 2,000-odd chains give the p99 as well as 3 s would).
    const steadyTimes: number[] = [];
    const steadyRate = pipelinedPerSec / 2;
    const steady = meter();
    const elu0 = performance.eventLoopUtilization();
    const steadyChains = await openLoop(
      { ratePerSec: steadyRate, seconds: opts.quick ? 2 : 20, drainMs: 60_000 },
      async (scheduled) => {
        await raw.chain();
        steadyTimes.push(performance.now() - scheduled);
      },
    );
    const steadyCpu = steady.stop(steadyChains);
    const steadyLoop = performance.eventLoopUtilization(elu0);
    await raw.projected();

    // The projection role alone, taken as the projection's own fold is (from a backlog, until its
    // consumer is drained): a second such consumer reads and acks every event the stream holds.
    const held = (await jsm.streams.info(raw.stream)).state.messages;
    const replay = meter();
    await raw.consume('replay', '>', async () => undefined);
    await raw.projected('replay');
    const replayCpu = replay.stop(held / EVENTS_PER_DISPATCH);
    const p50 = percentile(times, 50);
    const steadyP50 = percentile(steadyTimes, 50);
    const steadyP99 = percentile(steadyTimes, 99);
    return {
      rawDispatchP50Ms: round(p50, 3),
      rawDispatchP99Ms: round(percentile(times, 99), 3),
      rawDispatchSamples: samples,
      rawDispatchHopsP50Ms: await storedHops(raw.client, raw.stream, `${raw.root}.events.>`, sent),
      rawDispatchCpuMsPerDispatch: round(cpuMs / samples, 3),
      ...(writes !== undefined
        ? { rawDispatchWriteSyscallsPerDispatch: round(writes / samples, 1) }
        : {}),
      ...(brokerCpuMs !== undefined
        ? { rawDispatchBrokerCpuMsPerDispatch: round(brokerCpuMs / samples, 3) }
        : {}),
      guardedChainP50Ms: round(percentile(guardedTimes!, 50), 3),
      guardedChainP99Ms: round(percentile(guardedTimes!, 99), 3),
      rawChainPipelinedPerSec: Math.round(pipelinedPerSec),
      rawChainPipelinedChains: chains,
      rawChainCpuMsPerDispatch: pipelinedCpu.cpuMs,
      rawChainProjectionCpuMsPerDispatch: replayCpu.cpuMs,
      ...(pipelinedCpu.brokerCpuMs !== undefined
        ? { rawChainBrokerCpuMsPerDispatch: pipelinedCpu.brokerCpuMs }
        : {}),
      rawChainSteadyP50Ms: round(steadyP50, 3),
      rawChainSteadyP99Ms: round(steadyP99, 3),
      rawChainSteadyOfferedPerSec: Math.round(steadyRate),
      rawChainSteadyCpuMsPerDispatch: steadyCpu.cpuMs,
      rawChainSteadyLoopUtilization: round(steadyLoop.utilization, 3),
      rawChainSteadyP50VsOneAtATime: round(steadyP50 / p50),
      rawChainSteadyP99VsOneAtATime: round(steadyP99 / p50),
      ...(splitTimes && guardedSplitTimes && splitPipelined && guardedSplitPipelined
        ? {
            rawSplitChainP50Ms: round(percentile(splitTimes, 50), 3),
            rawSplitChainP99Ms: round(percentile(splitTimes, 99), 3),
            guardedSplitChainP50Ms: round(percentile(guardedSplitTimes, 50), 3),
            guardedSplitChainP99Ms: round(percentile(guardedSplitTimes, 99), 3),
            rawSplitChainPipelinedPerSec: Math.round(splitPipelined.perSec),
            rawSplitChainCpuMsPerDispatch: splitPipelined.cpu.cpuMs,
            guardedSplitChainPipelinedPerSec: Math.round(guardedSplitPipelined.perSec),
            ...(splitPipelined.cpu.brokerCpuMs !== undefined
              ? { rawSplitChainBrokerCpuMsPerDispatch: splitPipelined.cpu.brokerCpuMs }
              : {}),
          }
        : {}),
    };
  } finally {
    await splitOpening?.catch(() => undefined);
    await roles?.close();
    for (const chain of opened) await chain.close();
  }
}

/**
 * `chain` pipelined as the throughput phase runs: an untimed burst, then the timed one, its CPU
 * (this process's and the processes `pids`', and the broker's) until the projection consumer has
 * acked every event (as a dispatch's, until the projection folded it).
 */
async function pipelined(
  chain: OpenChain,
  name: string,
  {
    quick,
    pids = [],
    chains = quick ? 1_000 : 10_000,
  }: {
    quick: boolean;
    pids?: readonly number[];
    chains?: number;
  },
): Promise<{ chains: number; perSec: number; cpu: { cpuMs: number; brokerCpuMs?: number } }> {
  const burst = (tag: string, count: number) =>
    pool(count, PIPELINE_WINDOW, async (i) => void (await chain.chain(`${tag}${i}`)));
  // Quick: a smaller burst than the throughput phase's 2,000 (the run's minute), the same window.
  await burst(`${name}w`, quick ? 256 : 500);
  await chain.projected();
  const metered = meter(pids);
  const t0 = performance.now();
  await burst(name, chains);
  const ms = since(t0);
  await chain.projected();
  return { chains, perSec: chains / (ms / 1000), cpu: metered.stop(chains) };
}

/**
 * The raw and the guarded chain in this process, warmed, for a phase that times them between
 * blocks of its own samples: the all-in-one's latency (`benchLatency`'s `paired`). Its ratios to
 * the baseline section's chains compared figures taken tens of seconds apart, and this host's
 * speed drifts over that (2026-12-07: the raw chain's p50 2.34 ms in one quick run, 4.81 in the
 * next, Toolgate's 9.59 and 8.28); in the same blocks, a drift moves both sides of a ratio.
 */
export interface PairedChains {
  raw(): Promise<void>;
  /** Absent when opened without it (the split's floors are the baseline's layout chains). */
  guarded?(): Promise<void>;
  /**
   * The raw chain pipelined as the baseline's `rawChainPipelinedPerSec` is (the same sizes), its
   * CPU per chain (this process's, the broker's): run beside the dispatch's throughput phase.
   */
  rawPipelined(): Promise<{ perSec: number; cpuMs: number; brokerCpuMs?: number }>;
  close(): Promise<void>;
}

export async function openPairedChains(
  jsm: JetStreamManager,
  prefix: string,
  { quick, guarded: withGuarded = true }: { quick: boolean; guarded?: boolean },
): Promise<PairedChains> {
  const raw = await openChain(jsm, `${prefix}_pairraw`, `${prefix}.pairraw`);
  try {
    const guarded = withGuarded
      ? await openChain(jsm, `${prefix}_pairguarded`, `${prefix}.pairguarded`, { guard: guards() })
      : undefined;
    const close = async () => {
      await raw.close();
      await guarded?.close();
    };
    let bursts = 0;
    try {
      for (let i = 0; i < WARMUP; i++) {
        await raw.chain();
        await guarded?.chain();
      }
    } catch (err) {
      await close();
      throw err;
    }
    return {
      raw: async () => void (await raw.chain()),
      ...(guarded ? { guarded: async () => void (await guarded.chain()) } : {}),
      rawPipelined: async () => {
        const { perSec, cpu } = await pipelined(raw, `p${bursts++}-`, { quick });
        return { perSec, ...cpu };
      },
      close,
    };
  } catch (err) {
    await raw.close();
    throw err;
  }
}

/** A chain's roles, connected and consuming, ready for {@link OpenChain.chain}. */
interface OpenChain {
  stream: string;
  root: string;
  spec: ChainSpec;
  client: NatsConnection;
  /** One chain: the client's request to its reply. */
  chain(id?: string): Promise<Msg>;
  /** What a role's failed check reports: the waiting chain throws it. */
  refuse(err: Error): void;
  /** Resolves once the consumer `name` has acked everything. */
  projected(name?: string): Promise<void>;
  /**
   * Another durable consumer on the projection's connection, filtered on `events.<filter>` (a
   * chain whose roles are in this process only).
   */
  consume(name: string, filter: string, handle: (m: JsMsg) => Promise<void>): Promise<void>;
  /** Closes its connections and deletes its stream; idempotent. */
  close(): Promise<void>;
}

/**
 * The chain on stream `stream` (created here) under subject root `root`, its client and the tool's
 * worker here, and its roles ({@link serveRole}) here too — or, with `roles: 'elsewhere'`, left to
 * {@link spawnRoles} (each in a process of its own: the split shape's layout).
 */
async function openChain(
  jsm: JetStreamManager,
  stream: string,
  root: string,
  { guard, roles = 'here' }: { guard?: Guards; roles?: 'here' | 'elsewhere' } = {},
): Promise<OpenChain> {
  await addJournalLikeStream(jsm, stream, `${root}.events.>`);
  const conns: NatsConnection[] = [];
  const served: ServedRole[] = [];
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    for (const role of served) await role.close();
    await Promise.all(conns.map((nc) => nc.close().catch(() => undefined)));
    await jsm.streams.delete(stream).catch(() => undefined);
  };
  const open = async (role: string) => {
    const nc = await connect({
      servers: NATS_URL,
      name: `bench-${stream}-${role}`,
      ...BENCH_CONNECTION,
    });
    conns.push(nc);
    return nc;
  };
  /**
   * The first check that failed: a chain waiting on it times out, and says this instead (the
   * failure is the bench's, not the broker's).
   */
  let refusal: Error | undefined;
  const refuse = (err: Error) => void (refusal ??= err);
  try {
    const client = await open('client');
    const worker = await open('worker');
    worker.subscribe(`${root}.tool`, { callback: (_err, m) => void m.respond(PAYLOAD) });
    await worker.flush();
    const spec = { stream, root, ...(guard ? { guard } : {}) };
    if (roles === 'here')
      for (const role of ROLES) served.push(await serveRole(role, spec, refuse));
    const projection = served.at(-1);

    let n = 0;
    const projected = async (name = 'projection') => {
      for (;;) {
        const info = await jsm.consumers.info(stream, `${stream}_${name}`);
        if (info.num_pending + info.num_ack_pending === 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    return {
      stream,
      root,
      spec,
      client,
      // One timer per chain, the request's own (a chain whose append failed times out).
      chain: (id = `w${n++}`) =>
        client
          .request(`${root}.submit`, new TextEncoder().encode(id), { timeout: 10_000 })
          .catch((err: unknown) => {
            throw refusal ?? err;
          }),
      refuse,
      projected,
      consume: (name, filter, handle) => {
        if (!projection) throw new Error("the chain's projection runs in a process of its own");
        return projection.consume(name, filter, handle);
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * This process's CPU (with the processes `pids`' too) and the broker's from now until
 * `stop(chains)`, in ms per chain (the broker's when it runs on this machine): what every phase of
 * the raw chain reports.
 */
function meter(pids: readonly number[] = []): {
  stop(chains: number): { cpuMs: number; brokerCpuMs?: number };
} {
  const servers = startCpuMeter();
  const cpu0 = process.cpuUsage();
  const others = () => pids.reduce((sum, pid) => sum + procCpuSeconds(pid), 0);
  const others0 = others();
  return {
    stop(chains) {
      const cpu = process.cpuUsage(cpu0);
      const othersMs = (others() - others0) * 1000;
      const { brokerSeconds } = servers.stop();
      return {
        cpuMs: round(((cpu.user + cpu.system) / 1000 + othersMs) / chains, 3),
        ...(brokerSeconds !== undefined
          ? { brokerCpuMs: round((brokerSeconds * 1000) / chains, 3) }
          : {}),
      };
    },
  };
}
