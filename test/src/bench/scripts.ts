import { performance } from 'node:perf_hooks';
import { checkScript, ScriptEngine } from '@toolgate/script-tools';
import { ScriptExecutor, type PendingCall, type ScriptSource } from '@toolgate/tool-executor';
import { percentile, round } from './stats';

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
  };
}
