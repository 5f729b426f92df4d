import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { checkScript, ScriptEngine, type HostFunction } from '@toolgate/script-tools';
import { ScriptExecutor, type PendingCall, type ScriptSource } from '@toolgate/tool-executor';
import { runTool } from '@toolgate/tools';
import { benchBuiltin, benchToolContext } from './builtin-bench';
import { median, percentile, round } from './stats';

/** The trivial script tool: one parameter, no host function, an object back. */
const UPPER = [
  '// @tool upper',
  '// @description Upper-cases a text',
  '// @param text string required "the text"',
  'return { upper: params.text.toUpperCase() };',
].join('\n');

export interface ScriptsResult {
  scriptSamples: number;
  /** One call through the script executor, warm: the version compiled, a fresh QuickJS runtime per call. */
  scriptP50Ms: number;
  scriptP99Ms: number;
  /** The interpreter alone (runtime, context, the script, its result as JSON), for comparison. */
  scriptEngineP50Ms: number;
  neighbourSamples: number;
  /** A cheap in-process call (the `list_dir` builtin) with no script running. */
  neighbourP50QuietMs: number;
  neighbourP99QuietMs: number;
  /**
   * The same call while a script bombs memory and another spins, both in the same engine: what
   * one tenant's script costs every other call of the executor. Goal ≤ 50 ms.
   */
  neighbourP50DuringScriptBombMs: number;
  neighbourP99DuringScriptBombMs: number;
  /** From the attackers' deadline to both calls settled, the worst of the blocks (their workers are stopped or killed behind). */
  scriptBombSettleMs: number;
}

/**
 * `executors.scriptP50Ms`: a trivial script tool called through the `script` executor as the tool
 * runner calls it — the version found by contract hash (compiled on the first call, then kept),
 * the input checked against the contract, a fresh QuickJS runtime and context, the script, its
 * result checked to be JSON, the runtime freed — after 50 untimed calls. The registry is an
 * in-memory source here: a warm executor does not read it again for a compiled version.
 */
export async function benchScripts(opts: { quick: boolean }): Promise<ScriptsResult> {
  const engine = await ScriptEngine.load();
  const checked = checkScript(
    { source: UPPER },
    {
      expectedName: { name: 'upper', from: 'install' },
      isBuiltin: () => false,
      syntaxError: (s, f) => engine.syntaxError(s, f),
    },
  );
  if (!checked.ok) throw new Error(`bench script refused: ${checked.refusal.message}`);
  const { manifest } = checked;
  const source: ScriptSource = {
    contract: async (hash) => (hash === manifest.contractHash ? manifest.contract : undefined),
    scriptFiles: async (sha) => (sha === manifest.sha256 ? { source: UPPER } : undefined),
  };
  const executor = new ScriptExecutor({
    engine,
    registry: async () => source,
    builtins: new Map(),
  });
  const call: PendingCall = {
    tenant: 'bench',
    runId: 'bench',
    dispatchId: 'bench',
    tool: {
      name: 'upper',
      contractHash: manifest.contractHash,
      needsApproval: false,
      executor: 'script',
    },
    input: { text: 'make this loud' },
    agent: { agentType: 'bench' },
    isolation: 'none',
    causationId: 'bench',
    decidedBy: 'default',
  };
  const once = async () => {
    const outcome = await executor.run(call, { cwd: '/', timeoutMs: 10_000 });
    if (!outcome.ok) throw new Error(`bench script failed: ${JSON.stringify(outcome.error)}`);
  };
  for (let i = 0; i < 50; i++) await once();
  const samples = opts.quick ? 300 : 2000;
  const times: number[] = [];
  const engineTimes: number[] = [];
  for (let i = 0; i < samples; i++) {
    let t0 = performance.now();
    await once();
    times.push(performance.now() - t0);
    t0 = performance.now();
    await engine.run({
      source: 'return { upper: params.text.toUpperCase() };',
      fileName: 'upper.js',
      params: call.input,
      host: {},
    });
    engineTimes.push(performance.now() - t0);
  }
  return {
    scriptSamples: samples,
    scriptP50Ms: round(percentile(times, 50), 3),
    scriptP99Ms: round(percentile(times, 99), 3),
    scriptEngineP50Ms: round(percentile(engineTimes, 50), 3),
    ...(await benchNeighbours(engine, opts)),
  };
}

/** Two attackers: one grows its heap one MiB string at a time, one spins. */
const ATTACKERS = {
  bomb: "const a = [];\nfor (;;) a.push('x'.repeat(1 << 20));",
  spin: 'for (;;) {}',
};

/**
 * `executors.neighbourP99DuringScriptBombMs`: the `list_dir` builtin (in-process, on a directory
 * of 20 files) called back to back, in blocks that alternate between alone and while a memory-bomb
 * script and a spinning script run in the same engine — with budgets (10 min of CPU, 256 MiB of heap) that only their
 * deadline ends, which fires once the samples are taken (`scriptBombSettleMs`: from it to both
 * settled). On the executor's thread the attackers would hold every other call for as long as
 * they run (9.6–41 s in issue 23); in their worker threads they cost a neighbour a share of the
 * CPU.
 */
async function benchNeighbours(
  engine: ScriptEngine,
  opts: { quick: boolean },
): Promise<
  Pick<
    ScriptsResult,
    | 'neighbourSamples'
    | 'neighbourP50QuietMs'
    | 'neighbourP99QuietMs'
    | 'neighbourP50DuringScriptBombMs'
    | 'neighbourP99DuringScriptBombMs'
    | 'scriptBombSettleMs'
  >
> {
  const cwd = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-bench-neighbour-')));
  try {
    for (let i = 0; i < 20; i++) await writeFile(path.join(cwd, `file-${i}.txt`), `${i}\n`);
    // In process: the neighbour measures the executor's event loop, not a file helper's.
    const listDir = benchBuiltin('list_dir', cwd, { sandbox: null, files: null });
    const ctx = benchToolContext(cwd);
    const samples = opts.quick ? 300 : 2000;
    const blocks = opts.quick ? 3 : 10;
    const perBlock = Math.ceil(samples / blocks);
    const sample = async (into: number[]) => {
      for (let i = -5; i < perBlock; i++) {
        const t0 = performance.now();
        const outcome = await runTool(listDir, {}, ctx);
        if (!outcome.ok) throw new Error(`bench: list_dir failed: ${outcome.error.message}`);
        if (i >= 0) into.push(performance.now() - t0);
      }
    };
    // Quiet and attacked blocks alternate, so the machine's own noise (other processes) falls on
    // both alike; each attacked block starts both attackers afresh and ends them at a deadline.
    const quiet: number[] = [];
    const attacked: number[] = [];
    const settleMs: number[] = [];
    for (let block = 0; block < blocks; block++) {
      await sample(quiet);
      const deadline = new AbortController();
      const running = new Set<string>();
      let bothRunning!: () => void;
      const attackersRun = new Promise<void>((resolve) => (bothRunning = resolve));
      const settled: string[] = [];
      const attackers = Object.entries(ATTACKERS).map(([name, loop]) => {
        const started: HostFunction = async () => {
          running.add(name);
          if (running.size === 2) bothRunning();
          return null;
        };
        return engine
          .run({
            source: `await started();\n${loop}`,
            fileName: `${name}.js`,
            params: {},
            host: { started },
            limits: { cpuMs: 600_000, memoryBytes: 256 * 1024 * 1024 },
            signal: deadline.signal,
          })
          .then(
            () => {
              throw new Error(`bench: the ${name} script returned`);
            },
            (err: unknown) => {
              settled.push(name);
              if ((err as { code?: unknown }).code !== ErrorCode.Timeout) throw err;
            },
          );
      });
      await attackersRun;
      await sample(attacked);
      if (settled.length > 0) {
        throw new Error(`bench: ${settled.join(', ')} stopped before the samples were taken`);
      }
      const t0 = performance.now();
      deadline.abort(new ToolgateError(ErrorCode.Timeout, 'the bench deadline'));
      await Promise.all(attackers);
      settleMs.push(performance.now() - t0);
    }
    return {
      neighbourSamples: quiet.length,
      neighbourP50QuietMs: round(median(quiet), 3),
      neighbourP99QuietMs: round(percentile(quiet, 99), 3),
      neighbourP50DuringScriptBombMs: round(median(attacked), 3),
      neighbourP99DuringScriptBombMs: round(percentile(attacked, 99), 3),
      scriptBombSettleMs: round(Math.max(...settleMs), 1),
    };
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}
