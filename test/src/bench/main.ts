/**
 * `npm run bench [-- --quick]`: measures Toolgate on this machine and prints, as the last line of
 * stdout, one JSON object in the shape docs/benchmarks.md describes (human-readable tables above it).
 * Every ratio is against a baseline measured in this run. Uses the tests' NATS and PostgreSQL on a
 * stream prefix and schema of its own, and removes them (and its temp dirs) even on failure.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { EVENT_SIGNING } from '@toolgate/contracts';
import { useTestNats, useTestSchema, type TestSchema } from '@toolgate/testing';
import { benchBaseline, type BaselineResult } from './baseline';
import {
  benchRawDispatch,
  openPairedChains,
  SPLIT_WARM_BURST,
  type PairedChains,
  type RawDispatchResult,
} from './raw-chain';
import { BenchStack } from './bench-stack';
import {
  benchApprovals,
  benchDispatch,
  benchLatency,
  besidePipelined,
  benchSteady,
  benchThroughput,
  EVENTS_PER_DISPATCH,
  warmBurst,
  type ApprovalsResult,
  type DispatchResult,
} from './dispatch';
import { benchSigning, type SigningCost } from './signing';
import { REPO_ROOT } from '../support/process-stack';
import { benchGrowth, type GrowthResult } from './growth';
import { benchMemory, type MemoryResult } from './memory';
import { benchTenants, type TenantsResult } from './tenants';
import { benchPartitions, type PartitionsResult } from './partitions';
import { ASIDE_SECTIONS, type AsideSection } from './aside';
import { benchContainers, type ContainersResult } from './containers';
import { benchExecutors, type ExecutorsResult } from './executors';
import { benchScripts, type ScriptsResult } from './scripts';
import { benchPermissions } from './permissions';
import { BENCH_CONNECTION, phase, round, since } from './stats';
import { benchStartup, type StartupResult } from './startup';
import { benchWorktree } from './worktree';
import { benchWhatIf, type WhatIfResult } from './whatif';
import { benchMcp, type McpBenchResult } from './mcp';

interface Report {
  machine?: { cpus: number; node: string; natsServer: string; platform: string; cpuModel: string };
  baseline?: BaselineResult & RawDispatchResult;
  permissions?: {
    decisionsPerSec: number;
    /** The same calls with 980 more rules in the chain (1,002 deny and ask rules in all). */
    decisionsPerSec1kRules: number;
    policyRules1k: number;
    shellMatchesPerSec: number;
  };
  /** Policy what-if: recorded calls replayed through a candidate policy from the journal. */
  policy?: WhatIfResult;
  dispatch?: DispatchResult &
    Partial<RawChainRatios> & {
      /** `steadyP50Ms` ÷ `p50Ms`: latency at half the maximum against one at a time. */
      steadyP50VsOneAtATime?: number;
      /** `steadyP99Ms` ÷ `p50Ms`. */
      steadyP99VsOneAtATime?: number;
      /** `databaseCpuMsPerDispatch`: PostgreSQL's CPU per dispatch in the burst. */
      pgCpuMsPerDispatch?: number;
      /**
       * A lower bound on `cpuMsPerDispatch` from work every dispatch does and the raw chain does
       * not, each part measured in this run ({@link cpuFloor}, with the paired raw chain's CPU);
       * `cpuFloorVsRawChain` is it ÷ `pairedRawChainCpuMsPerDispatch`: no `cpuVsRawChain` below
       * it is reachable without dropping a signature, a verify or the fold.
       */
      cpuFloorMsPerDispatch?: number;
      cpuFloorVsRawChain?: number;
      /**
       * `pairedGuardedChainP50Ms` ÷ `pairedRawDispatchP50Ms` (and the p99s; the baseline's
       * `guardedChain…` ÷ `rawDispatch…` when unpaired): the raw chain one at a time with the work
       * every dispatch must do on its path added — the lowest `p50VsRawDispatch`
       * (`p99VsRawDispatch`) reachable without dropping a signature, a check or the read-back of a
       * `wait`.
       */
      p50FloorVsRawDispatch?: number;
      p99FloorVsRawDispatch?: number;
      /** Dispatch p50 with 1,000,000 events in the journal stream ÷ with an empty one (see `growth`). */
      p50GrowthAt1M?: number;
      /** The five services as separate processes (the deploy shape), measured the same way. */
      split?: SplitResult;
    };
  /**
   * A run with `--only signing` and no dispatch section: `dispatch`'s signing fields
   * (`signCostUs`, …), where a run with the dispatch section reports them.
   */
  signing?: SigningCost & {
    /**
     * µs of all the signs and verifies of one dispatch: `signsPerDispatch` × `signCostUs` +
     * `verifiesPerDispatch` × `verifyCostUs` (the costs of a `decided`, the event with the most
     * readers), the counts from the all-in-one's latency samples when the dispatch section ran
     * (`countsFrom: 'counted'`), else the four events' signers and readers (`'nominal'`).
     */
    costPerDispatchUs: number;
    signsPerDispatch: number;
    verifiesPerDispatch: number;
    countsFrom: 'counted' | 'nominal';
  };
  approvals?: ApprovalsResult;
  /** The same dispatch as an MCP tools/call and over HTTP (`callP50VsHttp`, goal ≤ 1.2). */
  mcp?: McpBenchResult;
  growth?: GrowthResult;
  tenants?: TenantsResult;
  /** The same multi-tenant load on a journal of one stream and of 4 partitions (`--only partitions`). */
  partitions?: PartitionsResult;
  memory?: MemoryResult;
  /** The sandbox's fields and the containers' (each set absent when it cannot run here). */
  executors?: Partial<ExecutorsResult & ContainersResult & ScriptsResult>;
  worktree?: {
    files: number;
    acquireMs: number;
    gitWorktreeAddMs: number;
    acquireVsGit: number;
    collectMs: number;
    samples: number;
  };
  startup?: StartupResult;
  run?: {
    mode: 'quick' | 'full';
    totalSeconds: number;
    sectionSeconds: Record<string, number>;
    /** Sections a quick run measured in a process of its own beside the growth section. */
    besideGrowth?: string[];
    /** Sections a quick run left out (see {@link FULL_RUN_ONLY}). */
    fullRunOnly?: string[];
  };
}

/**
 * The dispatch against its own message pattern in raw NATS (the same waits on the broker, none of
 * Toolgate's work: `baseline.rawDispatch…`, `baseline.rawChain…`), measured in the same run.
 */
interface RawChainRatios {
  /**
   * `p50Ms` ÷ the raw chain's p50, one at a time: `pairedRawDispatchP50Ms` (the all-in-one: timed
   * between its blocks of samples), else `baseline.rawDispatchP50Ms`.
   */
  p50VsRawDispatch: number;
  /** `p99Ms` ÷ `pairedRawDispatchP99Ms` (else `baseline.rawDispatchP99Ms`). */
  p99VsRawDispatch: number;
  /**
   * `cpuMsPerDispatch` (every process of Toolgate's, the load generator and worker too, in the
   * burst until the projection has folded it) ÷ the raw chain's pipelined CPU per chain:
   * `pairedRawChainCpuMsPerDispatch` (all-in-one: timed beside the burst), else
   * `baseline.rawChainCpuMsPerDispatch`. The two below likewise.
   */
  cpuVsRawChain: number;
  /** `brokerCpuMsPerDispatch` ÷ `pairedRawChainBrokerCpuMsPerDispatch`, both in a burst. */
  brokerCpuVsRawChain?: number;
  /** `throughputPerSec` ÷ `pairedRawChainPipelinedPerSec` (256 in flight each). */
  throughputVsRawChain: number;
}

/**
 * What a dispatch costs Toolgate's processes at the least, in ms, from figures of the same run: the
 * raw chain's CPU with its projection role (a consumer that only acks) replaced by Toolgate's
 * projection — each taken from a backlog, the fold at its most batched — plus the signatures the
 * raw chain does not make: every sign and verify of the dispatch counted in the latency samples,
 * less the projection's four verifies (its CPU has them), and the Ed25519 signature of the tool
 * request. Each part is timed where it is cheapest (a tight loop, a backlog), and what Toolgate
 * adds besides — the checks of each event's shape, the policy, the reads that decide, metrics —
 * is left out: a floor, not an estimate.
 */
function cpuFloor(
  b: RawDispatchResult,
  projectionCpuMsPerDispatch: number,
  s: SigningCost & { signsPerDispatch: number; verifiesPerDispatch: number },
  /** The raw chain's CPU per chain in the shape measured (the split's: `rawSplitChain…`). */
  rawChainCpuMsPerDispatch = b.rawChainCpuMsPerDispatch,
): number {
  // The projection verifies each event it folds.
  const pathVerifies = Math.max(0, s.verifiesPerDispatch - EVENTS_PER_DISPATCH);
  const signaturesUs =
    s.signsPerDispatch * s.signCostUs + pathVerifies * s.verifyCostUs + s.toolRequestSignUs;
  return (
    rawChainCpuMsPerDispatch -
    b.rawChainProjectionCpuMsPerDispatch +
    projectionCpuMsPerDispatch +
    signaturesUs / 1000
  );
}

function rawChainRatios(
  d: Pick<
    DispatchResult,
    | 'p50Ms'
    | 'p99Ms'
    | 'cpuMsPerDispatch'
    | 'brokerCpuMsPerDispatch'
    | 'throughputPerSec'
    | 'pairedRawDispatchP50Ms'
    | 'pairedRawDispatchP99Ms'
    | 'pairedRawChainCpuMsPerDispatch'
    | 'pairedRawChainBrokerCpuMsPerDispatch'
    | 'pairedRawChainPipelinedPerSec'
  >,
  b: BaselineResult & RawDispatchResult,
): RawChainRatios {
  const rawBrokerCpu = d.pairedRawChainBrokerCpuMsPerDispatch ?? b.rawChainBrokerCpuMsPerDispatch;
  return {
    p50VsRawDispatch: round(d.p50Ms / (d.pairedRawDispatchP50Ms ?? b.rawDispatchP50Ms), 2),
    p99VsRawDispatch: round(d.p99Ms / (d.pairedRawDispatchP99Ms ?? b.rawDispatchP99Ms), 2),
    cpuVsRawChain: round(d.cpuMsPerDispatch / rawChainCpu(d, b), 2),
    ...(d.brokerCpuMsPerDispatch !== undefined && rawBrokerCpu !== undefined
      ? { brokerCpuVsRawChain: round(d.brokerCpuMsPerDispatch / rawBrokerCpu, 2) }
      : {}),
    throughputVsRawChain: round(
      d.throughputPerSec / (d.pairedRawChainPipelinedPerSec ?? b.rawChainPipelinedPerSec),
      3,
    ),
  };
}

/**
 * The raw chain's CPU per pipelined chain the burst's ratios divide by: the one timed beside the
 * throughput phase (all-in-one), else the baseline's.
 */
function rawChainCpu(
  d: Pick<DispatchResult, 'pairedRawChainCpuMsPerDispatch'>,
  b: RawDispatchResult,
): number {
  return d.pairedRawChainCpuMsPerDispatch ?? b.rawChainCpuMsPerDispatch;
}

/** `dispatch.split`: the same phases with each service in a process of its own. */
interface SplitResult
  extends
    ServersCpu,
    RawChainRatios,
    Pick<
      DispatchResult,
      | 'pairedRawDispatchP50Ms'
      | 'pairedRawDispatchP99Ms'
      | 'pairedRawChainPipelinedPerSec'
      | 'pairedRawChainCpuMsPerDispatch'
      | 'pairedRawChainBrokerCpuMsPerDispatch'
    > {
  p50Ms: number;
  p99Ms: number;
  hopsP50Ms: DispatchResult['hopsP50Ms'];
  latencySamples: number;
  throughputPerSec: number;
  throughputDispatches: number;
  cpuMsPerDispatch: number;
  /** `cpuMsPerDispatch` by process: `bench` (load generator and worker) and each service. */
  cpuMsPerDispatchByProcess?: Record<string, number>;
  projectionCaughtUp: boolean;
  projectionCatchUpMs?: number;
  steadyP50Ms: number;
  steadyP99Ms: number;
  steadyOfferedPerSec: number;
  steadySeconds: number;
  steadySlowestHopsP50Ms: NonNullable<DispatchResult['steadySlowestHopsP50Ms']>;
  steadyCpuMsPerDispatch: number;
  /** Seconds until the five processes (from their sources) were all ready. */
  startSeconds: number;
  /**
   * The shape's own cost, from the raw chain with each role in a process of its own
   * (`baseline.rawSplitChain…`): its p50 ÷ `rawDispatchP50Ms` (`shapeP50VsRawDispatch`), its
   * CPU per chain ÷ `rawChainCpuMsPerDispatch` (`shapeCpuVsRawChain`) and its pipelined rate ÷
   * `rawChainPipelinedPerSec` (`shapeThroughputVsRawChain`). With the guards on that chain (the
   * split does a guarded chain's work and more, in as many processes): the floors under
   * `p50VsRawDispatch` and `p99VsRawDispatch` (`baseline.guardedSplitChain…` ÷ `rawDispatch…`),
   * its pipelined rate ÷ the raw chain's (`guardedChainThroughputVsRawChain`: a reference, not a
   * bound — the split batches its fold and acks where the chain's roles ack each event apart, and
   * outran it in some runs); and, when the
   * dispatch and signing sections ran, {@link cpuFloor} with the raw split chain's CPU.
   */
  shapeP50VsRawDispatch?: number;
  shapeCpuVsRawChain?: number;
  shapeThroughputVsRawChain?: number;
  guardedChainThroughputVsRawChain?: number;
  p50FloorVsRawDispatch?: number;
  p99FloorVsRawDispatch?: number;
  cpuFloorMsPerDispatch?: number;
  cpuFloorVsRawChain?: number;
  /**
   * Present when they started beside the sections beside growth (a quick run, once growth is
   * done, if those still run): `startSeconds` is then an upper bound. Nothing runs beside the
   * split's measurements.
   */
  startedBesideGrowth?: true;
}

/**
 * What only a full run (or `--only <section>`) measures. `npm start` until /readyz: most of its
 * ~10 s is PGlite creating its database (CPU, in WebAssembly); beside the growth section it
 * doubled that section's time and shifted its ratio, and the quick run would not fit in a minute.
 */
const FULL_RUN_ONLY = ['startup', 'partitions'] as const;

/** A dispatch's four journal events, each signed once by its producer … */
const DISPATCH_EVENTS = ['requested', 'decided', 'started', 'settled'] as const;
const NOMINAL_SIGNS_PER_DISPATCH = DISPATCH_EVENTS.length;
/** … and verified once by each of its readers. */
const NOMINAL_VERIFIES_PER_DISPATCH = DISPATCH_EVENTS.reduce(
  (n, type) => n + EVENT_SIGNING[type].readers.length,
  0,
);

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

/** Cleanups run last-in first-out, once, on success, failure or a signal. */
const cleanups: { what: string; run: () => Promise<void> }[] = [];
async function cleanUp(): Promise<void> {
  while (cleanups.length) {
    const c = cleanups.pop()!;
    try {
      await c.run();
    } catch (err) {
      log(`cleanup of ${c.what} failed: ${(err as Error).message}`);
    }
  }
}

function table(title: string, rows: [string, unknown][]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return [
    `${title}`,
    ...rows.map(
      ([k, v]) =>
        `  ${k.padEnd(width)}  ${typeof v === 'number' ? v.toLocaleString('en-US') : String(v)}`,
    ),
  ].join('\n');
}

async function main(): Promise<Report> {
  const quick = process.argv.includes('--quick');
  const only = onlySections();
  // A quick run leaves out what only a full one measures, unless `--only` names it.
  const wanted = (name: string) =>
    only ? only.has(name) : !(quick && (FULL_RUN_ONLY as readonly string[]).includes(name));
  const started = performance.now();
  const report: Report = {};
  const sectionSeconds: Record<string, number> = {};
  const section = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    log(`${name}…`);
    const t = performance.now();
    const value = await fn();
    sectionSeconds[name] = round(since(t) / 1000, 1);
    return value;
  };

  const nats = await useTestNats('bench', BENCH_CONNECTION);
  cleanups.push({ what: `streams of prefix ${nats.prefix}`, run: () => nats.cleanup() });
  log(`stream prefix ${nats.prefix} (${quick ? 'quick' : 'full'} run)`);

  const cpus = os.cpus();
  report.machine = {
    cpus: cpus.length,
    node: process.version,
    natsServer: nats.nc.info?.version ?? 'unknown',
    platform: `${process.platform}-${process.arch}`,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
  };

  // The dispatch and split sections' ratios are against it.
  if (['baseline', 'dispatch', 'split'].some(wanted))
    report.baseline = await section('baseline', async () => ({
      ...(await benchBaseline(nats.nc, nats.jsm, nats.prefix, { quick })),
      ...(await benchRawDispatch(nats.jsm, nats.prefix, { quick, split: wanted('split') })),
    }));

  let allInOneStopped: Promise<void> | undefined;
  let splitSchema: TestSchema | undefined;
  if (['dispatch', 'approvals', 'tenants', 'memory', 'mcp', 'split'].some(wanted)) {
    const schema = await useTestSchema('bench');
    cleanups.push({ what: `schema ${schema.schema}`, run: () => schema.cleanup() });
    const tenants = quick ? 100 : 1000;
    const stack = await section('stack start', () =>
      BenchStack.start(nats, schema, {
        shape: 'all-in-one',
        extraTenants: wanted('tenants') ? tenants : 0,
      }),
    );
    let stopping: Promise<void> | undefined;
    const stopStack = () => (stopping ??= stack.stop());
    cleanups.push({ what: 'the in-process stack', run: stopStack });

    let rssAfterMb: number | undefined;
    if (wanted('dispatch') && report.baseline) {
      // The raw and the guarded chain again: between the latency's blocks of samples, and the raw
      // one pipelined before and after the throughput phase.
      const paired = await openPairedChains(nats.jsm, nats.prefix, { quick });
      const dispatch = await section('dispatch', () =>
        benchDispatch(stack, nats, { quick, paired }),
      ).finally(() => paired.close());
      rssAfterMb = dispatch.rssAfterThroughputMb;
      report.dispatch = {
        ...dispatch,
        ...rawChainRatios(dispatch, report.baseline),
        ...(dispatch.databaseCpuMsPerDispatch !== undefined
          ? { pgCpuMsPerDispatch: dispatch.databaseCpuMsPerDispatch }
          : {}),
        ...(dispatch.steadyP50Ms !== undefined && dispatch.steadyP99Ms !== undefined
          ? {
              steadyP50VsOneAtATime: round(dispatch.steadyP50Ms / dispatch.p50Ms, 2),
              steadyP99VsOneAtATime: round(dispatch.steadyP99Ms / dispatch.p50Ms, 2),
            }
          : {}),
        p50FloorVsRawDispatch: round(
          (dispatch.pairedGuardedChainP50Ms ?? report.baseline.guardedChainP50Ms) /
            (dispatch.pairedRawDispatchP50Ms ?? report.baseline.rawDispatchP50Ms),
          2,
        ),
        p99FloorVsRawDispatch: round(
          (dispatch.pairedGuardedChainP99Ms ?? report.baseline.guardedChainP99Ms) /
            (dispatch.pairedRawDispatchP99Ms ?? report.baseline.rawDispatchP99Ms),
          2,
        ),
      };
    }
    if (wanted('approvals'))
      report.approvals = await section('approvals', () => benchApprovals(stack, nats, { quick }));
    if (wanted('tenants'))
      report.tenants = await section('tenants', () => benchTenants(stack, { tenants, quick }));
    if (wanted('mcp')) report.mcp = await section('mcp', () => benchMcp(stack, { quick }));
    if (wanted('memory'))
      report.memory = await section('memory', () =>
        benchMemory(stack, nats, { quick, rssAfterMb: rssAfterMb ?? stack.rssMb() }),
      );
    // It stops while the growth section sets up (nothing measured: the sections beside growth
    // report upper bounds); the split and the CPU-bound sections wait for it.
    allInOneStopped = stopStack();
    allInOneStopped.catch(() => undefined);
    splitSchema = schema;
  }

  // A quick run measures the worktree, executors and containers sections and `npm start` (all at
  // once) in a process of its own while the growth section runs: the
  // first three and growth report ratios of samples interleaved within each (the service's acquire
  // against git's, the sandbox against a bare spawn, the executor against plain runc, a full
  // stream against an empty one), which load from the others shifts alike. Absolute times there,
  // the start-up's seconds included, are upper bounds (`run.besideGrowth` names the sections).
  // Nothing runs beside the dispatch, approvals, tenants, memory and split measurements.
  const asideSections = quick && wanted('growth') ? ASIDE_SECTIONS.filter(wanted) : [];
  const aside = asideSections.length ? asideInAProcess(asideSections, nats.prefix) : undefined;
  let asideDone = false;
  aside?.then(
    () => (asideDone = true),
    () => undefined,
  );
  // The split's five processes start on the all-in-one's stream and schema once it has stopped:
  // in a quick run as soon as growth has taken its samples (beside its clean-up and what is left
  // of the sections beside it, so their start seconds are an upper bound,
  // `split.startedBesideGrowth`), in a full run once growth is over. It is measured alone, later.
  const baseline = report.baseline;
  let split: SplitStart | undefined;
  const splitStarts = (beside: boolean) => {
    if (split || !wanted('split') || !baseline || !splitSchema) return;
    split = startSplit(nats, splitSchema, beside, allInOneStopped);
    cleanups.push({ what: 'the split stack', run: split.stop });
    split.started.catch(() => undefined);
  };
  if (wanted('growth')) {
    report.growth = await section('growth', () =>
      benchGrowth({ quick, ...(aside ? { measured: () => splitStarts(true) } : {}) }),
    );
    if (report.dispatch) report.dispatch.p50GrowthAt1M = report.growth.p50GrowthAt1M;
  }
  await allInOneStopped;
  splitStarts(aside !== undefined && !asideDone);
  if (aside) {
    const t = performance.now();
    const { results, seconds } = await aside;
    sectionSeconds['(after growth, waiting for the sections beside it)'] = round(
      since(t) / 1000,
      1,
    );
    for (const [name, s] of Object.entries(seconds)) sectionSeconds[`${name} (beside growth)`] = s;
    if (results.worktree) report.worktree = results.worktree as Report['worktree'];
    if (results.executors) report.executors = results.executors as ExecutorsResult;
    if (results.containers)
      report.executors = { ...report.executors, ...(results.containers as ContainersResult) };
    if (results.startup) report.startup = results.startup as StartupResult;
  }
  const splitStart: SplitStart | undefined = split;
  if (splitStart && baseline) {
    const started = await splitStart.started;
    sectionSeconds[splitStart.beside ? 'split start (beside growth)' : 'split start'] =
      started.startSeconds;
    report.dispatch = {
      ...report.dispatch!,
      split: await section('split', () => benchSplit(splitStart, started, nats, baseline, quick)),
    };
  }
  // In the same run, with every stack stopped (CPU-bound, like the sections after it): what the
  // signatures on every event cost (docs/threat-model.md), among the dispatch figures; with
  // `--only signing` and no dispatch section, on their own.
  if ((report.dispatch && wanted('dispatch')) || wanted('signing')) {
    const signing = await section('signing', async () => benchSigning({ quick }));
    const d = report.dispatch;
    if (d && wanted('dispatch')) Object.assign(d, signing);
    const counted =
      d?.latencySignsPerDispatch !== undefined && d.latencyVerifiesPerDispatch !== undefined;
    const signs = counted ? d.latencySignsPerDispatch! : NOMINAL_SIGNS_PER_DISPATCH;
    const verifies = counted ? d.latencyVerifiesPerDispatch! : NOMINAL_VERIFIES_PER_DISPATCH;
    report.signing = {
      ...signing,
      costPerDispatchUs: round(signs * signing.signCostUs + verifies * signing.verifyCostUs, 1),
      signsPerDispatch: signs,
      verifiesPerDispatch: verifies,
      countsFrom: counted ? 'counted' : 'nominal',
    };
    if (d && counted && baseline && d.projectionCpuMsPerDispatch !== undefined) {
      const rawCpu = rawChainCpu(d, baseline);
      const floorMs = cpuFloor(baseline, d.projectionCpuMsPerDispatch, report.signing, rawCpu);
      d.cpuFloorMsPerDispatch = round(floorMs, 3);
      d.cpuFloorVsRawChain = round(floorMs / rawCpu, 2);
      if (d.split && baseline.rawSplitChainCpuMsPerDispatch !== undefined) {
        const splitFloorMs = cpuFloor(
          baseline,
          d.projectionCpuMsPerDispatch,
          report.signing,
          baseline.rawSplitChainCpuMsPerDispatch,
        );
        d.split.cpuFloorMsPerDispatch = round(splitFloorMs, 3);
        d.split.cpuFloorVsRawChain = round(splitFloorMs / baseline.rawChainCpuMsPerDispatch, 2);
      }
    }
  }
  const inline = (name: AsideSection) => wanted(name) && !asideSections.includes(name);

  // Two stacks of its own, one after the other, with every other stack stopped.
  if (wanted('partitions'))
    report.partitions = await section('partitions', () => benchPartitions({ quick }));
  if (wanted('permissions'))
    report.permissions = await section('permissions', () => benchPermissions({ quick }));
  if (wanted('policy'))
    report.policy = await section('policy what-if', () =>
      benchWhatIf(nats.nc, nats.jsm, nats.prefix, { quick }),
    );
  if (inline('worktree'))
    report.worktree = await section('worktree', () => benchWorktree({ quick }));
  if (inline('startup'))
    report.startup = await section('startup', () => benchStartup(nats.prefix, { quick }));
  if (inline('executors')) {
    const executors = await section('executors', () => benchExecutors({ quick }));
    if (executors) report.executors = executors;
  }
  if (inline('containers')) {
    const containers = await section('containers', () => benchContainers({ quick }));
    if (containers) report.executors = { ...report.executors, ...containers };
  }
  if (wanted('scripts')) {
    const scripts = await section('scripts', () => benchScripts({ quick }));
    report.executors = { ...report.executors, ...scripts };
  }
  report.run = {
    mode: quick ? 'quick' : 'full',
    totalSeconds: round(since(started) / 1000, 1),
    sectionSeconds,
    ...(asideSections.length ? { besideGrowth: [...asideSections] } : {}),
    ...(quick && !only ? { fullRunOnly: [...FULL_RUN_ONLY] } : {}),
  };
  return report;
}

/** The split stack starting (see `startSplit`), and its stop (once, whoever calls it first). */
interface SplitStart {
  started: Promise<{ stack: BenchStack; startSeconds: number }>;
  stop: () => Promise<void>;
  /** Whether it starts beside the sections beside growth (its start seconds an upper bound). */
  beside: boolean;
}

/**
 * The deploy shape: the five services each in a process of its own (from their sources, as
 * `npm run start:<service>` runs them), on the same broker, stream and schema as the all-in-one
 * was (it is stopped first). Starts them; `benchSplit` measures them.
 */
function startSplit(
  nats: Awaited<ReturnType<typeof useTestNats>>,
  schema: TestSchema,
  beside: boolean,
  /** The all-in-one's stop, if it is still under way. */
  after: Promise<void> | undefined,
): SplitStart {
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const started = (async () => {
    await after;
    const t = performance.now();
    const stack = await phase(
      `split: five processes start${beside ? ' (beside growth)' : ''}`,
      () =>
        BenchStack.start(nats, schema, {
          shape: 'split',
          ...(profileDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}/split`] } : {}),
        }),
    );
    return { stack, startSeconds: round(since(t) / 1000, 1) };
  })();
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= started.then(
      ({ stack }) => phase('five processes stop', () => stack.stop()),
      () => undefined,
    ));
  return { started, stop, beside };
}

/**
 * The split stack's latency, throughput and steady-load latency, measured as for the all-in-one
 * with nothing beside them; stops it.
 */
async function benchSplit(
  split: SplitStart,
  { stack, startSeconds }: Awaited<SplitStart['started']>,
  nats: Awaited<ReturnType<typeof useTestNats>>,
  baseline: BaselineResult & RawDispatchResult,
  quick: boolean,
): Promise<SplitResult> {
  let paired: PairedChains | undefined;
  try {
    // Each of the five processes compiles its own copy of the code on the path, where the
    // all-in-one's services share theirs: a burst first, in both modes, or the quick run measured
    // code still warming (its CPU per dispatch 3.3–3.9 ms after 500 dispatches, 1.4–1.8 after
    // 3,000 or more, 2026-12-07).
    await phase('warm-up burst', () => warmBurst(stack, nats, SPLIT_WARM_BURST, 'split-warm'));
    // The raw chain (in this process, as the baseline's) again beside the split's phases, as
    // beside the all-in-one's: its goals are ratios to it. (Its floors and the layout's own chains
    // are the baseline's: their processes are gone.)
    paired = await openPairedChains(nats.jsm, `${nats.prefix}_split`, { quick, guarded: false });
    const latencySamples = quick ? 100 : 1000;
    const latency = await phase('latency (warm-up and samples)', () =>
      benchLatency(stack, nats, {
        samples: latencySamples,
        runId: 'split-latency',
        // The all-in-one's warm-up (300) in both modes: with 100 the quick run's five processes
        // were still warming (p50 10.0–10.9 ms against 8.0–8.8 after 600, three pairs).
        paired,
      }),
    );
    const { result: tput, paired: pairedPipelined } = await besidePipelined(paired, nats, () =>
      phase('throughput', () =>
        benchThroughput(stack, nats, {
          dispatches: quick ? 2_000 : 10_000,
          warmBurst: 500,
          runId: 'split-tput',
          drainWaitMs: quick ? 5_000 : 60_000,
        }),
      ),
    );
    await paired.close();
    const pairedFields = {
      pairedRawDispatchP50Ms: latency.pairedRawDispatchP50Ms,
      pairedRawDispatchP99Ms: latency.pairedRawDispatchP99Ms,
      ...pairedPipelined,
    };
    const steady = await phase('steady load', () =>
      benchSteady(stack, nats, {
        ratePerSec: tput.throughputPerSec / 2,
        seconds: quick ? 2 : 20,
        runId: 'split-steady',
      }),
    );
    return {
      p50Ms: latency.p50Ms,
      p99Ms: latency.p99Ms,
      hopsP50Ms: latency.hopsP50Ms,
      latencySamples,
      throughputPerSec: tput.throughputPerSec,
      throughputDispatches: tput.throughputDispatches,
      cpuMsPerDispatch: tput.cpuMsPerDispatch,
      ...(tput.cpuMsPerDispatchByProcess
        ? { cpuMsPerDispatchByProcess: tput.cpuMsPerDispatchByProcess }
        : {}),
      ...pairedFields,
      ...rawChainRatios(
        { ...tput, p50Ms: latency.p50Ms, p99Ms: latency.p99Ms, ...pairedFields },
        baseline,
      ),
      ...serversCpu(tput),
      projectionCaughtUp: tput.projectionCaughtUp,
      ...(tput.projectionCatchUpMs !== undefined
        ? { projectionCatchUpMs: tput.projectionCatchUpMs }
        : {}),
      steadyP50Ms: steady.steadyP50Ms,
      steadyP99Ms: steady.steadyP99Ms,
      steadyOfferedPerSec: steady.steadyOfferedPerSec,
      steadySeconds: steady.steadySeconds,
      steadySlowestHopsP50Ms: steady.steadySlowestHopsP50Ms,
      steadyCpuMsPerDispatch: steady.steadyCpuMsPerDispatch,
      startSeconds,
      ...(split.beside ? { startedBesideGrowth: true as const } : {}),
      ...splitShapeRatios(baseline),
    };
  } finally {
    await paired?.close();
    await split.stop();
  }
}

/** `SplitResult`'s shape ratios and latency floors, when the baseline measured the split chains. */
function splitShapeRatios(
  b: BaselineResult & RawDispatchResult,
): Pick<
  SplitResult,
  | 'shapeP50VsRawDispatch'
  | 'shapeCpuVsRawChain'
  | 'shapeThroughputVsRawChain'
  | 'guardedChainThroughputVsRawChain'
  | 'p50FloorVsRawDispatch'
  | 'p99FloorVsRawDispatch'
> {
  const {
    rawSplitChainP50Ms: p50,
    rawSplitChainCpuMsPerDispatch: cpu,
    rawSplitChainPipelinedPerSec: perSec,
    guardedSplitChainP50Ms: guardedP50,
    guardedSplitChainP99Ms: guardedP99,
    guardedSplitChainPipelinedPerSec: guardedPerSec,
  } = b;
  if (p50 === undefined || cpu === undefined || perSec === undefined) return {};
  if (guardedP50 === undefined || guardedP99 === undefined || guardedPerSec === undefined)
    return {};
  return {
    shapeP50VsRawDispatch: round(p50 / b.rawDispatchP50Ms, 2),
    shapeCpuVsRawChain: round(cpu / b.rawChainCpuMsPerDispatch, 2),
    shapeThroughputVsRawChain: round(perSec / b.rawChainPipelinedPerSec, 3),
    guardedChainThroughputVsRawChain: round(guardedPerSec / b.rawChainPipelinedPerSec, 3),
    p50FloorVsRawDispatch: round(guardedP50 / b.rawDispatchP50Ms, 2),
    p99FloorVsRawDispatch: round(guardedP99 / b.rawDispatchP99Ms, 2),
  };
}

/** The CPU figures of a throughput phase outside the services' own processes. */
type ServersCpu = Pick<
  DispatchResult,
  'brokerCpuMsPerDispatch' | 'databaseCpuMsPerDispatch' | 'machineBusyPct' | 'stealPct'
>;

function serversCpu(t: ServersCpu): ServersCpu {
  const { brokerCpuMsPerDispatch, databaseCpuMsPerDispatch, machineBusyPct, stealPct } = t;
  return { brokerCpuMsPerDispatch, databaseCpuMsPerDispatch, machineBusyPct, stealPct };
}

/** The throughput phase's CPU outside the services: the broker, the database, the machine. */
function serversCpuRows(t: ServersCpu): [string, unknown][] {
  if (t.brokerCpuMsPerDispatch === undefined) return [];
  return [
    [
      'CPU per dispatch: broker / database',
      `${t.brokerCpuMsPerDispatch} / ${t.databaseCpuMsPerDispatch ?? '-'} ms`,
    ],
    ['machine busy / stolen over the phase', `${t.machineBusyPct ?? '-'} / ${t.stealPct ?? '-'} %`],
  ];
}

/** The burst's ratios to the pipelined raw chain. */
/** The raw (and guarded) chain timed beside a shape's phases: what its ratios divide by. */
function pairedRows(
  d: Partial<
    Pick<
      DispatchResult,
      | 'pairedRawDispatchP50Ms'
      | 'pairedRawDispatchP99Ms'
      | 'pairedGuardedChainP50Ms'
      | 'pairedGuardedChainP99Ms'
      | 'pairedRawChainPipelinedPerSec'
      | 'pairedRawChainCpuMsPerDispatch'
      | 'pairedRawChainBrokerCpuMsPerDispatch'
    >
  >,
): [string, unknown][] {
  const rows: [string, unknown][] = [];
  if (d.pairedRawDispatchP50Ms !== undefined)
    rows.push([
      `raw${d.pairedGuardedChainP50Ms !== undefined ? ' / guarded' : ''} chain between those samples p50 / p99`,
      `${d.pairedRawDispatchP50Ms} / ${d.pairedRawDispatchP99Ms}` +
        (d.pairedGuardedChainP50Ms !== undefined
          ? `, ${d.pairedGuardedChainP50Ms} / ${d.pairedGuardedChainP99Ms}`
          : '') +
        ' ms',
    ]);
  if (d.pairedRawChainPipelinedPerSec !== undefined)
    rows.push([
      'raw chain pipelined beside the burst (mean of before and after): rate, CPU per chain this process / broker',
      `${d.pairedRawChainPipelinedPerSec.toLocaleString('en-US')}/s, ${d.pairedRawChainCpuMsPerDispatch} / ${d.pairedRawChainBrokerCpuMsPerDispatch ?? '-'} ms`,
    ]);
  return rows;
}

function rawChainRows(r: Partial<RawChainRatios>): [string, unknown][] {
  if (r.cpuVsRawChain === undefined) return [];
  return [
    [
      'vs the pipelined raw chain: CPU / broker CPU per dispatch, throughput',
      `${r.cpuVsRawChain} / ${r.brokerCpuVsRawChain ?? '-'}, ${r.throughputVsRawChain}`,
    ],
  ];
}

/** `aside.ts` in a child process (its log lines pass through): each section's result and seconds. */
async function asideInAProcess(
  sections: readonly AsideSection[],
  prefix: string,
): Promise<{ results: Record<string, unknown>; seconds: Record<string, number> }> {
  const child = spawn(
    process.execPath,
    [
      '--require',
      path.join(REPO_ROOT, 'scripts', 'from-source.cjs'),
      path.join(__dirname, 'aside.ts'),
      '--quick',
      `--prefix=${prefix}`,
      sections.join(','),
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  cleanups.push({
    what: 'the sections beside growth',
    run: async () => void (child.exitCode === null && child.kill('SIGTERM')),
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`the sections beside growth (${sections.join(', ')}) failed`);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(last) as { results: Record<string, unknown>; seconds: Record<string, number> };
}

/**
 * `--only dispatch,approvals` (or `--only=…`) runs just those sections, for profiling and quick
 * checks; a report from such a run is partial (the sections not run are absent, never faked).
 */
function onlySections(): Set<string> | undefined {
  const i = process.argv.findIndex((a) => a === '--only' || a.startsWith('--only='));
  if (i < 0) return undefined;
  const arg = process.argv[i]!;
  const list = arg.startsWith('--only=') ? arg.slice('--only='.length) : process.argv[i + 1];
  return new Set((list ?? '').split(',').filter(Boolean));
}

/** The signing figures as one table row (the dispatch table's, or `--only signing`'s own). */
function signingRow(s: SigningCost): [string, unknown] {
  return [
    `sign one event for its ${s.signReaders} readers / verify once (Ed25519 verify); a tool request (Ed25519)`,
    `${s.signCostUs} / ${s.verifyCostUs} µs (${s.ed25519VerifyUs} µs); ${s.toolRequestSignUs} µs`,
  ];
}

function print(report: Report): void {
  const beside = (name: string) =>
    report.run?.besideGrowth?.includes(name) ? ' [beside growth: times are upper bounds]' : '';
  const {
    machine: m,
    baseline: b,
    dispatch: d,
    approvals: a,
    permissions: p,
    worktree: w,
    executors: x,
  } = report;
  const out: string[] = [];
  if (m)
    out.push(
      table('machine', [
        ['cpus', `${m.cpus} × ${m.cpuModel}`],
        ['node', m.node],
        ['nats-server', m.natsServer],
      ]),
    );
  if (b) {
    out.push(
      table(`raw JetStream baseline (file storage, ${b.payloadBytes} B payloads)`, [
        [
          `sync publish p50 / p99 (${b.syncSamples} awaited one by one)`,
          `${b.jetstreamSyncPublishP50Ms} / ${b.jetstreamSyncPublishP99Ms} ms`,
        ],
        [
          `async publish (${b.asyncMessages}, window ${b.asyncWindow})`,
          `${b.jetstreamAsyncPublishPerSec.toLocaleString('en-US')} msg/s`,
        ],
        [
          'durable pull consume + ack',
          `${b.jetstreamConsumeAckPerSec.toLocaleString('en-US')} msg/s`,
        ],
        [
          `raw dispatch chain p50 / p99 (${b.rawDispatchSamples} one at a time)`,
          `${b.rawDispatchP50Ms} / ${b.rawDispatchP99Ms} ms`,
        ],
        [
          'raw chain p50 per hop: submit→requested→decided→started→settled→reply',
          Object.values(b.rawDispatchHopsP50Ms).join(' / ') + ' ms',
        ],
        [
          'guarded chain (the raw one with the signatures, their checks and the read-back) p50 / p99',
          `${b.guardedChainP50Ms} / ${b.guardedChainP99Ms} ms`,
        ],
        [
          'raw chain: CPU per chain this process / broker, write system calls',
          `${b.rawDispatchCpuMsPerDispatch} / ${b.rawDispatchBrokerCpuMsPerDispatch ?? '-'} ms, ${b.rawDispatchWriteSyscallsPerDispatch ?? '-'}`,
        ],
        [
          `raw chain pipelined (${b.rawChainPipelinedChains}, 256 in flight): rate, CPU per chain this process / broker`,
          `${b.rawChainPipelinedPerSec.toLocaleString('en-US')}/s, ${b.rawChainCpuMsPerDispatch} / ${b.rawChainBrokerCpuMsPerDispatch ?? '-'} ms`,
        ],
        [
          `raw chain steady open loop ${b.rawChainSteadyOfferedPerSec}/s: p50 / p99, each ÷ one at a time (p50); CPU per chain, loop busy`,
          `${b.rawChainSteadyP50Ms} / ${b.rawChainSteadyP99Ms} ms, ${b.rawChainSteadyP50VsOneAtATime} / ${b.rawChainSteadyP99VsOneAtATime}; ${b.rawChainSteadyCpuMsPerDispatch} ms, ${b.rawChainSteadyLoopUtilization}`,
        ],
        ...(b.rawSplitChainP50Ms !== undefined
          ? ([
              [
                'the raw / guarded chain, each role in a process of its own: p50 / p99',
                `${b.rawSplitChainP50Ms} / ${b.rawSplitChainP99Ms} ms; ${b.guardedSplitChainP50Ms} / ${b.guardedSplitChainP99Ms} ms`,
              ],
              [
                'so, pipelined: raw rate, CPU per chain (this process and the four) / broker; guarded rate',
                `${b.rawSplitChainPipelinedPerSec?.toLocaleString('en-US')}/s, ${b.rawSplitChainCpuMsPerDispatch} / ${b.rawSplitChainBrokerCpuMsPerDispatch ?? '-'} ms; ${b.guardedSplitChainPipelinedPerSec?.toLocaleString('en-US')}/s`,
              ],
            ] as [string, unknown][])
          : []),
        [
          'CPU per sync publish: client / broker',
          `${b.clientCpuUsPerSyncPublish} / ${b.brokerCpuUsPerSyncPublish ?? '-'} µs`,
        ],
        ...(b.brokerCpuUsPerPublish !== undefined
          ? ([
              [
                'broker CPU per message: async publish / consume + ack',
                `${b.brokerCpuUsPerPublish} / ${b.brokerCpuUsPerConsumeAck} µs`,
              ],
            ] as [string, unknown][])
          : []),
      ]),
    );
  }
  if (d) {
    // `--only split` measures the split alone: no all-in-one figures to print then.
    if (d.hopsP50Ms)
      out.push(
        table(`dispatch: ${d.tool}, all services in one process`, [
          [
            `latency over NATS p50 / p99 (${d.latencySamples} sequential, after ${d.warmupDispatches})`,
            `${d.p50Ms} / ${d.p99Ms} ms`,
          ],
          [
            'p50 per hop: submit→requested→decided→started→settled→reply',
            Object.values(d.hopsP50Ms).join(' / ') + ' ms',
          ],
          ...(d.latencySlowestHopsP50Ms
            ? ([
                [
                  'slowest 1% (at least 5), p50 per hop; longest GC pause over the samples',
                  `${Object.values(d.latencySlowestHopsP50Ms).join(' / ')} ms; ${d.latencyGcMaxPauseMs} ms`,
                ],
              ] as [string, unknown][])
            : []),
          ...pairedRows(d),
          ...(d.p50VsRawDispatch !== undefined
            ? ([
                [
                  "p50 / p99 vs the raw dispatch chain, one at a time (the guarded chain's: the floor)",
                  `${d.p50VsRawDispatch} / ${d.p99VsRawDispatch} (${d.p50FloorVsRawDispatch ?? '-'} / ${d.p99FloorVsRawDispatch ?? '-'})`,
                ],
              ] as [string, unknown][])
            : []),
          ...(d.latencyWriteSyscallsPerDispatch !== undefined
            ? ([
                ['latency: write system calls per dispatch', d.latencyWriteSyscallsPerDispatch],
              ] as [string, unknown][])
            : []),
          ...(d.latencyCpuMsPerDispatch !== undefined
            ? ([
                [
                  'latency: CPU per dispatch this process / broker / database, loop busy, machine busy',
                  `${d.latencyCpuMsPerDispatch} / ${d.latencyBrokerCpuMsPerDispatch ?? '-'} / ${d.latencyDatabaseCpuMsPerDispatch ?? '-'} ms, ${d.latencyLoopUtilization}, ${d.latencyMachineBusyPct ?? '-'} %`,
                ],
              ] as [string, unknown][])
            : []),
          ...(d.httpP50Ms !== undefined
            ? ([
                [
                  `latency over HTTP p50 / p99 (${d.httpSamples} sequential)`,
                  `${d.httpP50Ms} / ${d.httpP99Ms} ms`,
                ],
              ] as [string, unknown][])
            : []),
          [
            `throughput (${d.throughputDispatches}, ${d.submitWindow} submissions in flight)`,
            `${d.throughputPerSec.toLocaleString('en-US')} dispatches/s`,
          ],
          ['journal appends per dispatch', d.journalAppendsPerDispatch],
          ['CPU per dispatch (this process)', `${d.cpuMsPerDispatch} ms`],
          ...serversCpuRows(d),
          ...rawChainRows(d),
          ...(d.cpuFloorVsRawChain !== undefined
            ? ([
                [
                  'CPU floor (the raw chain with the fold and the signatures) / ÷ the raw chain',
                  `${d.cpuFloorMsPerDispatch} ms / ${d.cpuFloorVsRawChain}`,
                ],
              ] as [string, unknown][])
            : []),
          ['event loop busy until the last settled', d.loopUtilization],
          [
            `steady open-loop load ${d.steadyOfferedPerSec}/s for ${d.steadySeconds} s: p50 / p99`,
            `${d.steadyP50Ms} / ${d.steadyP99Ms} ms`,
          ],
          [
            'steady p50 / p99 vs one at a time (p50)',
            `${d.steadyP50VsOneAtATime ?? '-'} / ${d.steadyP99VsOneAtATime ?? '-'}`,
          ],
          [
            'steady: CPU per dispatch, event loop busy',
            `${d.steadyCpuMsPerDispatch} ms, ${d.steadyLoopUtilization}`,
          ],
          [
            'steady, slowest 1%: p50 sent late / per hop',
            d.steadySlowestHopsP50Ms
              ? Object.values(d.steadySlowestHopsP50Ms).join(' / ') + ' ms'
              : '-',
          ],
          [
            'steady: event loop delay p99 / max, longest GC pause',
            `${d.steadyLoopDelayP99Ms} / ${d.steadyLoopDelayMaxMs} ms, ${d.steadyGcMaxPauseMs} ms`,
          ],
          [
            'projection backlog at last settle / drained after',
            `${d.projectionPendingAtLastSettle} events / ${d.projectionCatchUpMs !== undefined ? `${d.projectionCatchUpMs} ms` : `NOT drained, ${d.projectionBacklog} behind`}`,
          ],
          [
            'projection fold rate (backlog) vs pipeline events/s; its CPU per dispatch',
            `${d.projectionEventsPerSec} vs ${d.pipelineEventsPerSec} events/s; ${d.projectionCpuMsPerDispatch} ms`,
          ],
          ['dead-lettered', d.deadLettered],
        ]),
      );
    if (d.split)
      out.push(
        table('dispatch, the five services as separate processes', [
          [
            `processes ready after${d.split.startedBesideGrowth ? ' [beside growth: an upper bound]' : ''}`,
            `${d.split.startSeconds} s`,
          ],
          [
            `latency p50 / p99 (${d.split.latencySamples} sequential)`,
            `${d.split.p50Ms} / ${d.split.p99Ms} ms`,
          ],
          ['p50 per hop', Object.values(d.split.hopsP50Ms).join(' / ') + ' ms'],
          [
            `throughput (${d.split.throughputDispatches})`,
            `${d.split.throughputPerSec} dispatches/s`,
          ],
          [
            'CPU per dispatch (all six processes; by process)',
            `${d.split.cpuMsPerDispatch} ms${
              d.split.cpuMsPerDispatchByProcess
                ? ` (${Object.entries(d.split.cpuMsPerDispatchByProcess)
                    .map(([name, ms]) => `${name} ${ms}`)
                    .join(', ')})`
                : ''
            }`,
          ],
          ...serversCpuRows(d.split),
          ...pairedRows(d.split),
          [
            'p50 / p99 vs the raw dispatch chain, one at a time',
            `${d.split.p50VsRawDispatch} / ${d.split.p99VsRawDispatch}`,
          ],
          ...rawChainRows(d.split),
          ...(d.split.shapeP50VsRawDispatch !== undefined
            ? ([
                [
                  'the shape alone (raw chain, a process per role): p50, CPU, rate ÷ the raw chain',
                  `${d.split.shapeP50VsRawDispatch}, ${d.split.shapeCpuVsRawChain}, ${d.split.shapeThroughputVsRawChain}`,
                ],
                [
                  'floors (guarded chain so): p50 / p99, CPU per dispatch; its rate',
                  `${d.split.p50FloorVsRawDispatch} / ${d.split.p99FloorVsRawDispatch}, ${d.split.cpuFloorVsRawChain ?? '-'}; ${d.split.guardedChainThroughputVsRawChain}`,
                ],
              ] as [string, unknown][])
            : []),
          [
            `steady ${d.split.steadyOfferedPerSec}/s for ${d.split.steadySeconds} s: p50 / p99`,
            `${d.split.steadyP50Ms} / ${d.split.steadyP99Ms} ms`,
          ],
          ['steady: CPU per dispatch (all six processes)', `${d.split.steadyCpuMsPerDispatch} ms`],
          [
            'steady, slowest 1%: p50 sent late / per hop',
            Object.values(d.split.steadySlowestHopsP50Ms).join(' / ') + ' ms',
          ],
          [
            'projection drained after last settle',
            d.split.projectionCatchUpMs !== undefined
              ? `${d.split.projectionCatchUpMs} ms`
              : 'NOT drained',
          ],
        ]),
      );
  }
  const sg = report.signing;
  if (sg)
    out.push(
      table('signing (journal events)', [
        signingRow(sg),
        [
          `all signs and verifies of one dispatch (${sg.signsPerDispatch} + ${sg.verifiesPerDispatch}, ${sg.countsFrom})`,
          `${sg.costPerDispatchUs} µs`,
        ],
      ]),
    );
  const g = report.growth;
  if (g)
    out.push(
      table(
        `history: ${g.events.toLocaleString('en-US')} events already in the journal stream (${g.samples} samples each, blocks of ${g.block})`,
        [
          ['dispatch p50 empty / full', `${g.p50EmptyMs} / ${g.p50FullMs} ms`],
          ['dispatch p99 empty / full', `${g.p99EmptyMs} / ${g.p99FullMs} ms`],
          ['p50 growth', g.p50GrowthAt1M],
          ['fill / projection seed', `${g.fillSeconds} / ${g.seedSeconds} s`],
        ],
      ),
    );
  const t = report.tenants;
  if (t)
    out.push(
      table(`${t.tenants} tenants, a ${t.policyRules}-rule policy each`, [
        ['quiet p50 / p99', `${t.quietP50Ms} / ${t.quietP99Ms} ms`],
        [
          `reload storm (${t.reloadsPerSec} reloads/s) p50 / p99`,
          `${t.stormP50Ms} / ${t.stormP99Ms} ms`,
        ],
      ]),
    );
  const mem = report.memory;
  if (mem)
    out.push(
      table('memory', [
        ['RSS after the throughput phase', `${mem.rssAfterMb} MiB`],
        mem.rssGrowthMbPer100k !== undefined
          ? [
              `growth over ${mem.growthDispatches.toLocaleString('en-US')} dispatches (RSS / heap)`,
              `${mem.rssGrowthMbPer100k} / ${mem.heapUsedGrowthMbPer100k} MiB per 100k`,
            ]
          : [
              `growth over ${mem.growthDispatches.toLocaleString('en-US')} dispatches: RSS (not scaled) / heap`,
              `${mem.rssGrowthMb} MiB / ${mem.heapUsedGrowthMbPer100k} MiB per 100k`,
            ],
      ]),
    );
  if (a)
    out.push(
      table(`approvals (${a.samples} resolved one at a time)`, [
        [
          'resolve sent → settled p50 / p99',
          `${a.resolveToSettleP50Ms} / ${a.resolveToSettleP99Ms} ms`,
        ],
      ]),
    );
  if (report.partitions) {
    const q = report.partitions;
    const row = (r: PartitionsResult['onePartition']) =>
      `${r.cpuMsPerDispatch} / ${r.brokerCpuMsPerDispatch ?? '?'} / ${r.databaseCpuMsPerDispatch ?? '?'} ms, ${r.throughputPerSec}/s`;
    out.push(
      table(
        `journal partitions (${q.tenants} tenants, ${q.onePartition.dispatches} dispatches a run, medians of ${q.runsEach} runs)`,
        [
          [
            '1 stream: CPU per dispatch (Toolgate / broker / database), throughput',
            row(q.onePartition),
          ],
          [`${q.partitioned.partitions} partitions: the same`, row(q.partitioned)],
          [
            'CPU per dispatch of each run (1 stream | 4 partitions)',
            `${q.cpuMsPerDispatchRuns.onePartition.join(', ')} | ${q.cpuMsPerDispatchRuns.partitioned.join(', ')} ms`,
          ],
          [
            'CPU per dispatch, 4 partitions ÷ 1 (Toolgate / broker / database)',
            `${q.cpuVsOnePartition} / ${q.brokerCpuVsOnePartition ?? '?'} / ${q.databaseCpuVsOnePartition ?? '?'}`,
          ],
          ['events per partition', q.partitioned.eventsByPartition.join(' / ')],
          ...(q.cluster
            ? [q.cluster.onePartition, q.cluster.partitioned].map((c): [string, unknown] => [
                `3-node cluster, R3, ${c.partitions === 1 ? '1 stream' : `${c.partitions} partitions`}: leaders by node; broker CPU by node; busiest node's share; Toolgate CPU, throughput`,
                `${c.leadersByNode.join('/')}; ${c.brokerCpuMsPerDispatchByNode.join(' / ')} ms; ${c.busiestNodeShare}; ${c.cpuMsPerDispatch} ms, ${c.throughputPerSec}/s`,
              ])
            : []),
        ],
      ),
    );
  }
  if (p)
    out.push(
      table('permissions (one thread)', [
        ['decisions/s', p.decisionsPerSec],
        [`decisions/s, ${p.policyRules1k}-rule chain`, p.decisionsPerSec1kRules],
        ['shell matches/s', p.shellMatchesPerSec],
      ]),
    );
  if (report.policy) {
    const q = report.policy;
    out.push(
      table(
        `policy what-if (${q.whatifCalls.toLocaleString('en-US')} recorded calls, ${q.whatifJournalEvents.toLocaleString('en-US')} journal events)`,
        [
          ['calls replayed/s (stream read → report)', q.whatifCallsPerSec],
          ['seconds for all', q.whatifSeconds],
          ['calls whose verdict changed', q.whatifChanged],
        ],
      ),
    );
  }
  if (w) {
    out.push(
      table(
        `worktree (${w.files.toLocaleString('en-US')} files, median of ${w.samples})${beside('worktree')}`,
        [
          ['acquire (median)', `${w.acquireMs} ms`],
          ['git worktree add (median)', `${w.gitWorktreeAddMs} ms`],
          ['acquire ÷ git', w.acquireVsGit],
          ['collect (median)', `${w.collectMs} ms`],
        ],
      ),
    );
  }
  if (report.startup)
    out.push(
      table(`npm start until /readyz answers (from sources, nothing built)${beside('startup')}`, [
        ['first start of this run', `${report.startup.firstStartSeconds} s`],
        ...(report.startup.warmStartSeconds !== undefined
          ? ([['second start', `${report.startup.warmStartSeconds} s`]] as [string, unknown][])
          : []),
      ]),
    );
  if (x?.subprocessP50Ms !== undefined) {
    out.push(
      table(`executors (${x.samples} calls each, interleaved)${beside('executors')}`, [
        [
          `subprocess in the sandbox p50 / p99 (${x.command})`,
          `${x.subprocessP50Ms} / ${x.subprocessP99Ms} ms`,
        ],
        ['same command, bare spawn p50', `${x.bareSpawnP50Ms} ms`],
        ['sandbox ÷ bare', x.sandboxVsBare],
        [
          `trivial command (${x.trivialCommand}): sandbox / bare p50`,
          `${x.trivialSubprocessP50Ms} / ${x.trivialBareSpawnP50Ms} ms`,
        ],
        ['trivial: sandbox ÷ bare', x.trivialSandboxVsBare],
        ['sandbox overhead per call', `${x.sandboxOverheadMs} ms`],
        [
          `builtin in its scope's sandboxed helper / in process p50 (${x.builtinCommand}, ${x.builtinSamples} calls)`,
          `${x.builtinSandboxedP50Ms} / ${x.builtinBareP50Ms} ms`,
        ],
        ['builtin: sandbox ÷ bare (goal ≤ 1.5)', x.builtinSandboxVsBare],
      ]),
    );
  }
  if (x?.containerP50Ms !== undefined) {
    out.push(
      table(`containers (${x.containerSamples} calls each, interleaved)${beside('containers')}`, [
        [
          `container executor, runc p50 / p99 (${x.containerCommand})`,
          `${x.containerP50Ms} / ${x.containerP99Ms} ms`,
        ],
        ['same bundle, plain runc run p50', `${x.bareRuncP50Ms} ms`],
        ['container ÷ runc', x.containerVsRunc],
      ]),
    );
  }
  if (x?.scriptP50Ms !== undefined) {
    out.push(
      table(`scripts (${x.scriptSamples} calls, warm)`, [
        [
          'a trivial script tool through the script executor p50 / p99',
          `${x.scriptP50Ms} / ${x.scriptP99Ms} ms`,
        ],
        ['the QuickJS run alone p50', `${x.scriptEngineP50Ms} ms`],
        [
          `list_dir p50 / p99, alone (${x.neighbourSamples} calls)`,
          `${x.neighbourP50QuietMs} / ${x.neighbourP99QuietMs} ms`,
        ],
        [
          'list_dir p50 / p99 while a script bombs memory and another spins (goal p99 ≤ 50)',
          `${x.neighbourP50DuringScriptBombMs} / ${x.neighbourP99DuringScriptBombMs} ms`,
        ],
        ['their deadline to both settled', `${x.scriptBombSettleMs} ms`],
      ]),
    );
  }
  if (report.run) out.push(`${report.run.mode} run: ${report.run.totalSeconds} s`);
  process.stdout.write(`${out.join('\n\n')}\n\n${JSON.stringify(report)}\n`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}

main()
  .then(async (report) => {
    await cleanUp();
    print(report);
  })
  .catch(async (err: unknown) => {
    await cleanUp();
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
