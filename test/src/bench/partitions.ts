import { performance } from 'node:perf_hooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureJournalStreams } from '@toolgate/bus';
import { createSubjects, journalPartitionOf } from '@toolgate/contracts';
import {
  startNatsCluster,
  useTestNats,
  useTestSchema,
  type NatsCluster,
  type TestNats,
} from '@toolgate/testing';
import { BenchStack, tenantToken } from './bench-stack';
import { submitter, untilSettled } from './dispatch';
import { listenerPid, procCpuSeconds, startCpuMeter } from './machine-cpu';
import { BENCH_CONNECTION, percentile, pool, round } from './stats';

/** Partitions of the partitioned run (the other run has one: the default journal). */
const PARTITIONS = 4;
/** Tenants the load is spread over, as many in each partition. */
const TENANTS_PER_PARTITION = 2;
/** In-flight submissions, as in the dispatch section's throughput phase. */
const SUBMIT_WINDOW = 256;

/** One run's figures: the same load on a journal of `partitions` streams. */
export interface PartitionRun {
  partitions: number;
  dispatches: number;
  /**
   * CPU (user + system) per dispatch of the all-in-one process (every service, the load generator
   * and the worker) until the projection has folded every partition.
   */
  cpuMsPerDispatch: number;
  /** The broker's and the database's over the same span (this machine's: shared with others). */
  brokerCpuMsPerDispatch?: number;
  databaseCpuMsPerDispatch?: number;
  throughputPerSec: number;
  /** Journal events each partition's stream holds after the run (its share of the work). */
  eventsByPartition: number[];
}

export interface PartitionsResult {
  tenants: number;
  /** Runs of each kind, alternated (one stream, 4 partitions, one stream, …). */
  runsEach: number;
  /** The median of each figure over the one-stream runs… */
  onePartition: PartitionRun;
  /** …and over the partitioned runs. */
  partitioned: PartitionRun;
  /** Every run's `cpuMsPerDispatch`, in order: how far the machine's load moved them. */
  cpuMsPerDispatchRuns: { onePartition: number[]; partitioned: number[] };
  /** `partitioned.cpuMsPerDispatch ÷ onePartition.cpuMsPerDispatch` (medians): 1 is "unchanged". */
  cpuVsOnePartition: number;
  brokerCpuVsOnePartition?: number;
  databaseCpuVsOnePartition?: number;
  /** The same load on a 3-node cluster, R3: one stream, then 4 partitions (one run each). */
  cluster?: { onePartition: ClusterRun; partitioned: ClusterRun };
}

/** A run on the 3-node cluster: where the broker's work went. */
export interface ClusterRun {
  partitions: number;
  dispatches: number;
  /** Partitions each node leads, by node (in the nodes' order). */
  leadersByNode: number[];
  /** Each node's nats-server CPU per dispatch (ms), in the nodes' order. */
  brokerCpuMsPerDispatchByNode: number[];
  /** The busiest node's share of the three's broker CPU (1/3: even; the stream leader's, higher). */
  busiestNodeShare: number;
  cpuMsPerDispatch: number;
  throughputPerSec: number;
}

/**
 * The same load — dispatches of tenants spread evenly over 4 partitions, `SUBMIT_WINDOW` in
 * flight — on an unpartitioned journal and on one of 4 partitions, alternated, each run on a stack,
 * prefix and schema of its own: what a dispatch costs with the journal split in streams. Medians,
 * since a shared machine's load moves single runs by tens of percent.
 */
export async function benchPartitions(opts: { quick: boolean }): Promise<PartitionsResult> {
  // Tenants among the bench's extra ones (`tenantToken`), as many in each of the 4 partitions.
  const chosen: number[] = [];
  const per = new Array<number>(PARTITIONS).fill(0);
  for (let i = 0; chosen.length < PARTITIONS * TENANTS_PER_PARTITION; i++) {
    const p = journalPartitionOf(tenantToken(i).tenant, PARTITIONS);
    if (per[p]! < TENANTS_PER_PARTITION) {
      per[p]!++;
      chosen.push(i);
    }
  }
  const dispatches = opts.quick ? 2_000 : 10_000;
  const runsEach = 3;
  // A first stack runs colder than the next ones in the same process (its warm-up burst
  // notwithstanding): one is run and thrown away.
  await run(1, chosen, Math.min(dispatches, 1_000));
  const one: PartitionRun[] = [];
  const four: PartitionRun[] = [];
  for (let i = 0; i < runsEach; i++) {
    one.push(await run(1, chosen, dispatches));
    four.push(await run(PARTITIONS, chosen, dispatches));
  }
  const cluster = await clusterRuns(chosen, opts.quick ? 1_000 : 5_000);
  const onePartition = medianRun(one);
  const partitioned = medianRun(four);
  const ratio = (a?: number, b?: number) =>
    a === undefined || b === undefined ? undefined : round(a / b, 2);
  const broker = ratio(partitioned.brokerCpuMsPerDispatch, onePartition.brokerCpuMsPerDispatch);
  const database = ratio(
    partitioned.databaseCpuMsPerDispatch,
    onePartition.databaseCpuMsPerDispatch,
  );
  return {
    tenants: chosen.length,
    runsEach,
    onePartition,
    partitioned,
    cpuMsPerDispatchRuns: {
      onePartition: one.map((r) => r.cpuMsPerDispatch),
      partitioned: four.map((r) => r.cpuMsPerDispatch),
    },
    cpuVsOnePartition: ratio(partitioned.cpuMsPerDispatch, onePartition.cpuMsPerDispatch)!,
    ...(broker !== undefined ? { brokerCpuVsOnePartition: broker } : {}),
    ...(database !== undefined ? { databaseCpuVsOnePartition: database } : {}),
    cluster,
  };
}

/**
 * One stream, then 4 partitions, on a 3-node cluster of the bench's own (R3 streams), each on a
 * prefix and schema of its own: each node's nats-server CPU over the burst, so the report shows
 * whether the broker's work sits on one stream leader or is spread over the nodes.
 */
async function clusterRuns(
  tenants: readonly number[],
  dispatches: number,
): Promise<{ onePartition: ClusterRun; partitioned: ClusterRun }> {
  const cluster = await startNatsCluster({ label: 'bench-parts' });
  try {
    const onePartition = await clusterRun(cluster, 1, tenants, dispatches);
    const partitioned = await clusterRun(cluster, PARTITIONS, tenants, dispatches);
    return { onePartition, partitioned };
  } finally {
    await cluster.cleanup();
  }
}

async function clusterRun(
  cluster: NatsCluster,
  partitions: number,
  tenants: readonly number[],
  dispatches: number,
): Promise<ClusterRun> {
  const base = await useTestNats(`bench-c${partitions}`, {
    ...BENCH_CONNECTION,
    servers: cluster.servers,
  });
  const schema = await useTestSchema(`bench-c${partitions}`);
  const nats: TestNats = {
    ...base,
    subjects: createSubjects(base.prefix, { journalPartitions: partitions }),
  };
  let stack: BenchStack | undefined;
  try {
    // The streams first, with a patient API (four R3 streams at once on a loaded machine), then
    // every node given at least one leader (a step-down moves one off a node leading two).
    const setup = await jetstreamManager(base.nc, { timeout: 30_000 });
    await ensureJournalStreams(setup, nats.subjects, { replicas: 3, manage: true });
    const leaders = async () => {
      const led = cluster.nodes.map(() => 0);
      for (const p of nats.subjects.journal.partitions) {
        const { leader } = await cluster.streamPlacement(p.stream);
        led[cluster.nodes.indexOf(leader)]!++;
      }
      return led;
    };
    for (let attempt = 0; partitions >= cluster.nodes.length && attempt < 20; attempt++) {
      const led = await leaders();
      if (led.every((n) => n >= 1)) break;
      for (const p of nats.subjects.journal.partitions) {
        const { leader } = await cluster.streamPlacement(p.stream);
        if (led[cluster.nodes.indexOf(leader)]! > 1) {
          await cluster.stepDown(p.stream);
          break;
        }
      }
    }
    stack = await BenchStack.start(nats, schema, {
      shape: 'all-in-one',
      extraTenants: Math.max(...tenants) + 1,
      env: {
        NATS_URL: cluster.url,
        TOOLGATE_STREAM_REPLICAS: '3',
        TOOLGATE_JOURNAL_PARTITIONS: String(partitions),
      },
      servers: cluster.servers,
    });
    const pids = cluster.nodes.map((n) => listenerPid(n.port));
    const nodeCpu = () => pids.map((pid) => (pid === undefined ? 0 : procCpuSeconds(pid)));
    const {
      seconds,
      cpuSeconds,
      metered: byNode,
    } = await measuredBurst(stack, nats, tenants, {
      warmup: 300,
      dispatches,
      meter: () => {
        const nodes0 = nodeCpu();
        return () => nodeCpu().map((s, i) => s - nodes0[i]!);
      },
    });
    // Where the partitions were led as the burst ended (the spreading above held, or not).
    const led = await leaders();
    const total = byNode.reduce((a, b) => a + b, 0);
    return {
      partitions,
      dispatches,
      leadersByNode: led,
      brokerCpuMsPerDispatchByNode: byNode.map((s) => round((s * 1000) / dispatches, 3)),
      busiestNodeShare: round(Math.max(...byNode) / total, 2),
      cpuMsPerDispatch: round((cpuSeconds * 1000) / dispatches, 3),
      throughputPerSec: Math.round(dispatches / seconds),
    };
  } finally {
    await stack?.stop();
    await base.cleanup();
    await schema.cleanup();
  }
}

/** Each figure's median over `runs` (of one kind). */
function medianRun(runs: readonly PartitionRun[]): PartitionRun {
  const median = (pick: (r: PartitionRun) => number | undefined) => {
    const values = runs.map(pick).filter((v): v is number => v !== undefined);
    return values.length ? percentile(values, 50) : undefined;
  };
  const broker = median((r) => r.brokerCpuMsPerDispatch);
  const database = median((r) => r.databaseCpuMsPerDispatch);
  return {
    partitions: runs[0]!.partitions,
    dispatches: runs[0]!.dispatches,
    cpuMsPerDispatch: median((r) => r.cpuMsPerDispatch)!,
    ...(broker !== undefined ? { brokerCpuMsPerDispatch: broker } : {}),
    ...(database !== undefined ? { databaseCpuMsPerDispatch: database } : {}),
    throughputPerSec: median((r) => r.throughputPerSec)!,
    eventsByPartition: runs.at(-1)!.eventsByPartition,
  };
}

async function run(
  partitions: number,
  tenants: readonly number[],
  dispatches: number,
): Promise<PartitionRun> {
  const base = await useTestNats(`bench-p${partitions}`, BENCH_CONNECTION);
  const schema = await useTestSchema(`bench-p${partitions}`);
  // The bench's clients name the partitioned subjects, as the services do.
  const nats: TestNats = {
    ...base,
    subjects: createSubjects(base.prefix, { journalPartitions: partitions }),
  };
  const highest = Math.max(...tenants) + 1;
  let stack: BenchStack | undefined;
  try {
    stack = await BenchStack.start(nats, schema, {
      shape: 'all-in-one',
      extraTenants: highest,
      env: { TOOLGATE_JOURNAL_PARTITIONS: String(partitions) },
    });
    const {
      seconds,
      cpuSeconds,
      metered: spent,
    } = await measuredBurst(stack, nats, tenants, {
      warmup: 500,
      dispatches,
      meter: () => {
        const servers = startCpuMeter();
        return () => servers.stop();
      },
    });
    const perDispatch = (s: number | undefined) =>
      s === undefined ? undefined : round((s * 1000) / dispatches, 3);
    const eventsByPartition: number[] = [];
    for (const p of nats.subjects.journal.partitions)
      eventsByPartition.push((await nats.jsm.streams.info(p.stream)).state.messages);
    const broker = perDispatch(spent.brokerSeconds);
    const database = perDispatch(spent.databaseSeconds);
    return {
      partitions,
      dispatches,
      cpuMsPerDispatch: perDispatch(cpuSeconds)!,
      ...(broker !== undefined ? { brokerCpuMsPerDispatch: broker } : {}),
      ...(database !== undefined ? { databaseCpuMsPerDispatch: database } : {}),
      throughputPerSec: Math.round(dispatches / seconds),
      eventsByPartition,
    };
  } finally {
    await stack?.stop();
    await base.cleanup();
    await schema.cleanup();
  }
}

/** Waits until the projection's consumer of every partition has nothing pending or unacked. */
/**
 * Registers the tools of `tenants` on `stack`; the burst it returns submits `count` calls spread
 * over them round robin, `SUBMIT_WINDOW` in flight, and waits for every one to settle.
 */
/**
 * An untimed warm-up burst (the concurrent paths compiled, every tenant's tools and policy cached),
 * then the measured one, each folded before what follows: the measured burst's seconds to its last
 * settlement, the all-in-one's CPU until the projection has folded it, and what `meter` read over
 * the same span (started just before the burst, read after the fold).
 */
async function measuredBurst<M>(
  stack: BenchStack,
  nats: TestNats,
  tenants: readonly number[],
  opts: { warmup: number; dispatches: number; meter: () => () => M },
): Promise<{ seconds: number; cpuSeconds: number; metered: M }> {
  const burst = await tenantsBurst(stack, nats, tenants);
  await burst('parts-warmup', opts.warmup);
  await untilFolded(nats);
  const cpu0 = stack.cpuSeconds();
  const stop = opts.meter();
  const t0 = performance.now();
  await burst('parts', opts.dispatches);
  const seconds = (stack.watch.lastSettledAt - t0) / 1000;
  await untilFolded(nats);
  return { seconds, cpuSeconds: stack.cpuSeconds() - cpu0, metered: stop() };
}

async function tenantsBurst(
  stack: BenchStack,
  nats: TestNats,
  tenants: readonly number[],
): Promise<(runId: string, count: number) => Promise<void>> {
  const tokens = tenants.map((i) => tenantToken(i).token);
  for (const token of tokens) await stack.registerTools(token);
  const submit = submitter(stack);
  return async (runId, count) => {
    const settled = stack.watch.runSettled(runId, count);
    await pool(count, SUBMIT_WINDOW, async (i) => {
      const reply = await submit(runId, 0, tokens[i % tokens.length]);
      if (reply.status !== 'accepted')
        throw new Error(`partitions: a submission was not accepted: ${JSON.stringify(reply)}`);
    });
    await untilSettled(settled, stack.watch, nats, `${count} dispatches to settle`);
    if (stack.watch.failure) throw new Error(stack.watch.failure);
  };
}

async function untilFolded(nats: TestNats, maxMs = 120_000): Promise<void> {
  const deadline = performance.now() + maxMs;
  for (;;) {
    let backlog = 0;
    for (const p of nats.subjects.journal.partitions) {
      const info = await nats.jsm.consumers.info(p.stream, nats.subjects.consumer('journal'));
      backlog += info.num_pending + info.num_ack_pending;
    }
    if (backlog === 0) return;
    if (performance.now() > deadline)
      throw new Error(`partitions: the projection still has ${backlog} events to fold`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
