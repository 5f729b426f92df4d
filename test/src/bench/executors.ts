import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { runProcess, Sandbox, type ProcessRequest } from '@toolgate/sandbox';
import { FileScopePool } from '@toolgate/tool-executor';
import { runTool, type ToolDef } from '@toolgate/tools';
import { benchBuiltin, benchToolContext } from './builtin-bench';
import { median, percentile, round } from './stats';

/**
 * A subprocess tool as teams write them: a Node script reading its JSON input on stdin and writing
 * a JSON result to stdout (the subprocess protocol), run by the same Node binary as Toolgate.
 */
const NODE_TOOL = [
  process.execPath,
  '-e',
  'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.stringify({words:JSON.parse(s).text.split(" ").length})))',
];
/** The least a command can do (copy stdin to stdout): the sandbox's cost with nothing to hide it. */
const TRIVIAL = ['/bin/cat'];

export interface ExecutorsResult {
  command: string;
  samples: number;
  subprocessP50Ms: number;
  subprocessP99Ms: number;
  bareSpawnP50Ms: number;
  sandboxVsBare: number;
  trivialCommand: string;
  trivialSubprocessP50Ms: number;
  trivialBareSpawnP50Ms: number;
  trivialSandboxVsBare: number;
  /** What the sandbox adds to one call, from the trivial pair. */
  sandboxOverheadMs: number;
  /** The builtin of the pair below, and its input. */
  builtinCommand: string;
  builtinSamples: number;
  /** The builtin through its scope's sandboxed helper (warm), as the executor runs it by default. */
  builtinSandboxedP50Ms: number;
  /** The same builtin in the executor's process (EXECUTOR_SANDBOX=off). */
  builtinBareP50Ms: number;
  /** `builtinSandboxedP50Ms ÷ builtinBareP50Ms`, samples interleaved; goal ≤ 1.5. */
  builtinSandboxVsBare: number;
}

/**
 * The subprocess executor's process against a bare spawn of the same command, same input, same
 * runner (deadline, output caps, group kill), samples interleaved so machine noise hits both:
 * `subprocessP50Ms` is one call's process in the sandbox as the executor runs it (launcher,
 * bubblewrap with every namespace, prlimit, the command; a pids cgroup when run as root);
 * `bareSpawnP50Ms` is the command spawned directly. Returns undefined when no sandbox can be opened
 * on this machine (the section is then absent).
 */
export async function benchExecutors(opts: {
  quick: boolean;
}): Promise<ExecutorsResult | undefined> {
  let sandbox: Sandbox;
  try {
    sandbox = await Sandbox.open();
  } catch (err) {
    process.stderr.write(`bench: executors skipped, no sandbox here: ${(err as Error).message}\n`);
    return undefined;
  }
  const samples = opts.quick ? 7 : 100;
  const cwd = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-bench-exec-')));
  try {
    const request = (argv: string[]): ProcessRequest => ({
      argv,
      cwd,
      env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
      stdin: JSON.stringify({ text: 'count these four words' }),
      timeoutMs: 30_000,
      maxOutputBytes: 256 * 1024,
    });
    const pair = async (argv: string[]) => {
      const sandboxed: number[] = [];
      const bare: number[] = [];
      for (let i = -5; i < samples; i++) {
        let t = performance.now();
        const a = await sandbox.run(request(argv));
        const sandboxMs = performance.now() - t;
        t = performance.now();
        const b = await runProcess(request(argv));
        const bareMs = performance.now() - t;
        if (a.exitCode !== 0 || b.exitCode !== 0 || a.stdout.text() !== b.stdout.text()) {
          throw new Error(
            `executors bench: ${argv[0]} differs or fails in the sandbox: ${a.stderr.text()}`,
          );
        }
        if (i >= 0) {
          sandboxed.push(sandboxMs);
          bare.push(bareMs);
        }
      }
      return { sandboxed, bare };
    };
    const tool = await pair(NODE_TOOL);
    const trivial = await pair(TRIVIAL);
    const builtin = await builtinPair(sandbox, cwd, opts.quick ? 300 : 3000);
    const p50 = (xs: number[]) => round(median(xs));
    return {
      command: 'node -e <read JSON from stdin, write JSON to stdout>',
      samples,
      subprocessP50Ms: p50(tool.sandboxed),
      subprocessP99Ms: round(percentile(tool.sandboxed, 99)),
      bareSpawnP50Ms: p50(tool.bare),
      sandboxVsBare: round(median(tool.sandboxed) / median(tool.bare)),
      trivialCommand: TRIVIAL.join(' '),
      trivialSubprocessP50Ms: p50(trivial.sandboxed),
      trivialBareSpawnP50Ms: p50(trivial.bare),
      trivialSandboxVsBare: round(median(trivial.sandboxed) / median(trivial.bare)),
      sandboxOverheadMs: round(median(trivial.sandboxed) - median(trivial.bare)),
      builtinCommand: 'read_file of a 40-line, 1.2 KB file',
      builtinSamples: builtin.sandboxed.length,
      builtinSandboxedP50Ms: round(median(builtin.sandboxed), 3),
      builtinBareP50Ms: round(median(builtin.bare), 3),
      builtinSandboxVsBare: round(median(builtin.sandboxed) / median(builtin.bare)),
    };
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}

/**
 * `executors.builtinSandboxVsBare`: one read_file through runTool (validation, policy, the read
 * with its caps) as the executor runs it by default — in the scope's long-lived sandboxed helper —
 * against the same call in the executor's process, samples interleaved, after warm-up calls (the
 * helper is started then: a scope's first call pays the helper's start, ~0.1–0.2 s, once per idle
 * period).
 */
async function builtinPair(
  sandbox: Sandbox,
  cwd: string,
  samples: number,
): Promise<{ sandboxed: number[]; bare: number[] }> {
  const lines = Array.from({ length: 40 }, (_, i) => `line ${i + 1}: ${'x'.repeat(20)}`);
  await writeFile(path.join(cwd, 'notes.txt'), `${lines.join('\n')}\n`);
  const files = new FileScopePool(sandbox);
  const sandboxedTool = benchBuiltin('read_file', cwd, { sandbox, files });
  const bareTool = benchBuiltin('read_file', cwd, { sandbox, files: null });
  const ctx = benchToolContext(cwd);
  const once = async (t: ToolDef) => {
    const start = performance.now();
    const outcome = await runTool(t, { path: 'notes.txt' }, ctx);
    const ms = performance.now() - start;
    if (!outcome.ok) throw new Error(`executors bench: read_file failed: ${outcome.error.message}`);
    return ms;
  };
  const sandboxed: number[] = [];
  const bare: number[] = [];
  try {
    for (let i = -50; i < samples; i++) {
      // Alternating which goes first, so neither always runs right after the other.
      const first = i % 2 === 0;
      const b0 = first ? undefined : await once(bareTool);
      const a = await once(sandboxedTool);
      const b = b0 ?? (await once(bareTool));
      if (i >= 0) {
        sandboxed.push(a);
        bare.push(b);
      }
    }
  } finally {
    await files.close();
  }
  return { sandboxed, bare };
}
