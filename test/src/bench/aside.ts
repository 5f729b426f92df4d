/**
 * `node --require scripts/from-source.cjs aside.ts --quick --prefix=<p> <section,…>`: sections that
 * a quick run measures in a process of its own, beside the growth section (see `main.ts`), all at
 * the same time. The worktree, executors and containers sections each report ratios of samples
 * they interleave themselves (the service's worktree acquire against `git worktree add`, the
 * sandbox against a bare spawn, the container executor against plain runc), which load from the
 * other work shifts alike; `npm start`'s seconds, like their absolute times, are upper bounds there. Prints one JSON object as its last line: each section's result
 * (absent when it cannot run here) and its seconds.
 */
import { performance } from 'node:perf_hooks';
import { benchContainers } from './containers';
import { benchExecutors } from './executors';
import { benchStartup } from './startup';
import { round, since } from './stats';
import { benchWorktree } from './worktree';

export const ASIDE_SECTIONS = ['worktree', 'executors', 'containers', 'startup'] as const;
export type AsideSection = (typeof ASIDE_SECTIONS)[number];

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const prefix = process.argv.find((a) => a.startsWith('--prefix='))?.slice('--prefix='.length);
  const wanted = (process.argv.at(-1) ?? '')
    .split(',')
    .filter((s): s is AsideSection => (ASIDE_SECTIONS as readonly string[]).includes(s));
  const run: Record<AsideSection, () => Promise<unknown>> = {
    worktree: () => benchWorktree({ quick }),
    executors: () => benchExecutors({ quick }),
    containers: () => benchContainers({ quick }),
    startup: () => {
      if (!prefix) throw new Error('aside.ts: startup needs --prefix=<stream prefix>');
      return benchStartup(prefix, { quick });
    },
  };
  const results: Record<string, unknown> = {};
  const seconds: Record<string, number> = {};
  const one = async (name: AsideSection) => {
    process.stderr.write(`bench: ${name} (beside growth)…\n`);
    const t = performance.now();
    const result = await run[name]();
    seconds[name] = round(since(t) / 1000, 1);
    if (result !== undefined) results[name] = result;
  };
  // All at once: on an idle machine the growth section's sequential dispatches leave most of the
  // cores to them, and one after another they would outlast it.
  // Held until the sections end: the sandbox's idle file helpers and script workers are unref'd
  // (a service's NATS connection holds its loop; nothing else holds this process's), and a helper
  // retired mid-section is awaited through its exit — without a handle the process would end
  // there, exit code 0 and no report.
  const hold = setInterval(() => undefined, 60_000);
  try {
    await Promise.all(wanted.map(one));
  } finally {
    clearInterval(hold);
  }
  process.stdout.write(`${JSON.stringify({ results, seconds })}\n`);
}

if (require.main === module)
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  });
