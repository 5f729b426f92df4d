import { performance } from 'node:perf_hooks';

/** Nearest-rank percentile (p in 0..100) of a non-empty sample. */
export function percentile(values: readonly number[], p: number): number {
  if (!values.length) throw new Error('percentile of an empty sample');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

/** The median of a non-empty sample (the mean of the middle two when its size is even). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Rounds to `digits` decimals (2 by default). */
export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Elapsed milliseconds since `t0` (a `performance.now()` reading). */
export function since(t0: number): number {
  return performance.now() - t0;
}

/** Rejects after `ms` with a message naming what was awaited. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs `task(i)` for i in [0, count) with at most `window` in flight. */
export async function pool(
  count: number,
  window: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(window, count) }, async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  });
  await Promise.all(lanes);
}

/**
 * An open loop: call i is sent at t0 + i / `ratePerSec` whatever happened to the ones before, for
 * `seconds`; `send(scheduled, sentAt)` gets its scheduled and actual send times (`performance.now()`
 * clock), so its latency can run from the scheduled one and a stall is charged to every call it
 * delays. Resolves once every call has ended (at most `drainMs` after the last was sent); the count.
 */
export async function openLoop(
  opts: { ratePerSec: number; seconds: number; drainMs: number },
  send: (scheduled: number, sentAt: number) => Promise<void>,
): Promise<number> {
  const total = Math.max(1, Math.round(opts.ratePerSec * opts.seconds));
  const interval = 1000 / opts.ratePerSec;
  const inFlight: Promise<void>[] = [];
  const t0 = performance.now() + 20;
  let i = 0;
  while (i < total) {
    const now = performance.now();
    for (; i < total && t0 + i * interval <= now; i++)
      inFlight.push(send(t0 + i * interval, performance.now()));
    const next = t0 + i * interval - performance.now();
    if (next > 0) await new Promise((r) => setTimeout(r, next));
    else await new Promise((r) => setImmediate(r));
  }
  await withTimeout(Promise.all(inFlight), opts.drainMs, "the open loop's calls to end");
  return total;
}

/** Runs `fn` and logs (stderr) how long it took, so a slow phase of a section shows in the log. */
export async function phase<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t = performance.now();
  try {
    return await fn();
  } finally {
    process.stderr.write(`bench:   ${what} ${(since(t) / 1000).toFixed(1)} s\n`);
  }
}

/**
 * The bench's own NATS connections (its baseline, load, fills and raw chain): without an async
 * stack trace captured for every request — two errors built per publish — as the services'
 * connections (`connectNats`), so the raw figures are what the client can do, not what tracing costs.
 */
export const BENCH_CONNECTION = { noAsyncTraces: true } as const;

/**
 * One-at-a-time samples of each thing compared in turn, this many at a time (the raw chains', and
 * Toolgate's beside the paired chains): the host's speed drifts within a run.
 */
export const SAMPLE_BLOCK = 25;
