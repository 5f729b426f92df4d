import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { runProcess, Sandbox, type ProcessRequest } from '@toolgate/sandbox';
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
    };
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}
