/**
 * How long `npm start` takes until the gateway answers `/readyz`: the command a newcomer types,
 * run for real (npm, scripts/dev-env.sh, the all-in-one from its sources), on a stream prefix and
 * a PGlite directory of its own. Nothing is built first and swc keeps no cache between runs, so the
 * first start of a fresh clone and a later one differ only by what the OS has cached: both are
 * measured, the first start of this run first.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { round, since } from './stats';

export interface StartupResult {
  firstStartSeconds: number;
  /** Absent in a quick run, which starts once. */
  warmStartSeconds?: number;
}

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
const READY_WITHIN_MS = 120_000;

/** One `npm start` until ready, then a graceful stop; seconds to ready. */
async function timeOneStart(prefix: string, pglitePath: string): Promise<number> {
  const started = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: REPO_ROOT,
    // Its own process group, so the stop reaches node under npm and sh.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      TOOLGATE_PREFIX: prefix,
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      DATABASE_URL: '',
      JOURNAL_PGLITE_PATH: pglitePath,
      TOOLGATE_TOKENS: '[]',
    },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(
        () => reject(new Error(`npm start was not ready within ${READY_WITHIN_MS} ms:\n${out}`)),
        READY_WITHIN_MS,
      );
      const read = (chunk: Buffer) => {
        out += chunk.toString();
        const m = /gateway listening on (http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      child.stdout.on('data', read);
      child.stderr.on('data', read);
      void exited.then(() => reject(new Error(`npm start exited before it was ready:\n${out}`)));
    });
    // The log line comes once everything listens; readiness is what a caller waits for.
    for (;;) {
      const ready = await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      if (since(started) > READY_WITHIN_MS) throw new Error('npm start never became ready');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return since(started) / 1000;
  } finally {
    if (child.exitCode === null && child.pid) process.kill(-child.pid, 'SIGTERM');
    await exited;
  }
}

export async function benchStartup(
  prefix: string,
  opts: { quick: boolean } = { quick: false },
): Promise<StartupResult> {
  const dir = await mkdtemp(path.join(tmpdir(), 'toolgate-bench-startup-'));
  try {
    const firstStartSeconds = await timeOneStart(`${prefix}_s1`, path.join(dir, 'first'));
    if (opts.quick) return { firstStartSeconds: round(firstStartSeconds, 2) };
    const warmStartSeconds = await timeOneStart(`${prefix}_s2`, path.join(dir, 'warm'));
    return {
      firstStartSeconds: round(firstStartSeconds, 2),
      warmStartSeconds: round(warmStartSeconds, 2),
    };
  } finally {
    // npm exits before the node under it has closed PGlite's files: retry while they go away.
    await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
}
