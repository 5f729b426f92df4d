/**
 * `npm run bench [-- --quick]`: measures Toolgate on this machine and prints, as the last line of
 * stdout, one JSON object in the shape of `shared/BENCH.md` (human-readable tables above it).
 * Every ratio is against a baseline measured in this run. Uses the tests' NATS and PostgreSQL on a
 * stream prefix and schema of its own, and removes them (and its temp dirs) even on failure.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { useTestNats, useTestSchema } from '@toolgate/testing';
import { benchBaseline, type BaselineResult } from './baseline';
import {
  BenchStack,
  benchApprovals,
  benchDispatch,
  type ApprovalsResult,
  type DispatchResult,
} from './dispatch';
import { benchContainers, type ContainersResult } from './containers';
import { benchExecutors, type ExecutorsResult } from './executors';
import { benchScripts, type ScriptsResult } from './scripts';
import { benchPermissions } from './permissions';
import { round, since } from './stats';
import { benchStartup, type StartupResult } from './startup';
import { benchWorktree } from './worktree';
import { benchWhatIf, type WhatIfResult } from './whatif';

interface Report {
  machine?: { cpus: number; node: string; natsServer: string; platform: string; cpuModel: string };
  baseline?: BaselineResult;
  permissions?: { decisionsPerSec: number; shellMatchesPerSec: number };
  /** Policy what-if: recorded calls replayed through a candidate policy from the journal. */
  policy?: WhatIfResult;
  dispatch?: DispatchResult & { throughputVsBound: number };
  approvals?: ApprovalsResult;
  /** The sandbox's fields and the containers' (each set absent when it cannot run here). */
  executors?: Partial<ExecutorsResult & ContainersResult & ScriptsResult>;
  worktree?: {
    files: number;
    acquireMs: number;
    gitWorktreeAddMs: number;
    acquireVsGit: number;
    collectMs: number;
  };
  startup?: StartupResult;
  run?: { mode: 'quick' | 'full'; totalSeconds: number; sectionSeconds: Record<string, number> };
}

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

  const nats = await useTestNats('bench');
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

  report.baseline = await section('baseline', () =>
    benchBaseline(nats.nc, nats.jsm, nats.prefix, { quick }),
  );

  const schema = await useTestSchema('bench');
  cleanups.push({ what: `schema ${schema.schema}`, run: () => schema.cleanup() });
  const stack = await section('stack start', () => BenchStack.start(nats, schema));
  let stackStopped = false;
  const stopStack = async () => {
    if (stackStopped) return;
    stackStopped = true;
    await stack.stop();
  };
  cleanups.push({ what: 'the in-process stack', run: stopStack });

  const dispatch = await section('dispatch', () => benchDispatch(stack, nats, { quick }));
  const bound = report.baseline.jetstreamAsyncPublishPerSec / dispatch.journalAppendsPerDispatch;
  report.dispatch = { ...dispatch, throughputVsBound: round(dispatch.throughputPerSec / bound, 3) };
  report.approvals = await section('approvals', () => benchApprovals(stack, nats, { quick }));
  // CPU-bound sections run with the stack stopped, so its background work does not share the cores.
  await stopStack();

  report.permissions = await section('permissions', () => benchPermissions({ quick }));
  report.policy = await section('policy what-if', () =>
    benchWhatIf(nats.nc, nats.jsm, nats.prefix, { quick }),
  );
  report.worktree = await section('worktree', () => benchWorktree({ quick }));
  report.startup = await section('startup', () => benchStartup(nats.prefix));
  const executors = await section('executors', () => benchExecutors({ quick }));
  if (executors) report.executors = executors;
  const containers = await section('containers', () => benchContainers({ quick }));
  if (containers) report.executors = { ...report.executors, ...containers };
  const scripts = await section('scripts', () => benchScripts({ quick }));
  report.executors = { ...report.executors, ...scripts };
  report.run = {
    mode: quick ? 'quick' : 'full',
    totalSeconds: round(since(started) / 1000, 1),
    sectionSeconds,
  };
  return report;
}

function print(report: Report): void {
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
      ]),
    );
  }
  if (d) {
    out.push(
      table(`dispatch: ${d.tool}, all services in one process`, [
        [
          `latency over NATS p50 / p99 (${d.latencySamples} sequential)`,
          `${d.p50Ms} / ${d.p99Ms} ms`,
        ],
        [
          `latency over HTTP p50 / p99 (${d.httpSamples} sequential)`,
          `${d.httpP50Ms} / ${d.httpP99Ms} ms`,
        ],
        [
          `throughput (${d.throughputDispatches}, ${d.submitWindow} submissions in flight)`,
          `${d.throughputPerSec.toLocaleString('en-US')} dispatches/s`,
        ],
        ['journal appends per dispatch', d.journalAppendsPerDispatch],
        ['throughput vs bound (async publish ÷ appends)', d.throughputVsBound],
        [
          'projection backlog at last settle / drained after',
          `${d.projectionPendingAtLastSettle} events / ${d.projectionCaughtUp ? `${d.projectionCatchUpMs} ms` : `NOT drained, ${d.projectionBacklog} behind`}`,
        ],
        [
          'projection fold rate while draining',
          d.projectionEventsPerSec === undefined
            ? 'n/a (no backlog)'
            : `${d.projectionEventsPerSec} events/s`,
        ],
        ['dead-lettered', d.deadLettered],
      ]),
    );
  }
  if (a)
    out.push(
      table(`approvals (${a.samples} resolved one at a time)`, [
        [
          'resolve sent → settled p50 / p99',
          `${a.resolveToSettleP50Ms} / ${a.resolveToSettleP99Ms} ms`,
        ],
      ]),
    );
  if (p)
    out.push(
      table('permissions (one thread)', [
        ['decisions/s', p.decisionsPerSec],
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
      table(`worktree (${w.files} files)`, [
        ['acquire (median)', `${w.acquireMs} ms`],
        ['git worktree add (median)', `${w.gitWorktreeAddMs} ms`],
        ['acquire ÷ git', w.acquireVsGit],
        ['collect (median)', `${w.collectMs} ms`],
      ]),
    );
  }
  if (report.startup)
    out.push(
      table('npm start until /readyz answers (from sources, nothing built)', [
        ['first start of this run', `${report.startup.firstStartSeconds} s`],
        ['second start', `${report.startup.warmStartSeconds} s`],
      ]),
    );
  if (x?.subprocessP50Ms !== undefined) {
    out.push(
      table(`executors (${x.samples} calls each, interleaved)`, [
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
      ]),
    );
  }
  if (x?.containerP50Ms !== undefined) {
    out.push(
      table(`containers (${x.containerSamples} calls each, interleaved)`, [
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
