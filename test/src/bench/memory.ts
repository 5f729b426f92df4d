import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { TestNats } from '@toolgate/testing';
import type { BenchStack } from './bench-stack';
import { submitter, untilProjected, untilSettled } from './dispatch';
import { pool, round } from './stats';

export interface MemoryResult {
  /** RSS of the all-in-one (this process: services, worker and load generator) after the throughput phase. */
  rssAfterMb: number;
  /** Dispatches settled in the growth run (100,000; 1,200 in a quick run, in 3 chunks). */
  growthDispatches: number;
  /**
   * RSS growth over the growth run, per 100,000 settled dispatches: the RSS after its last chunk
   * minus the RSS after its first (both after a full garbage collection), scaled. Full runs only: a
   * quick run's 800 dispatches (after its first chunk) scaled by 125 turn the allocator returning or taking a few pages
   * into thousands of MiB either way.
   */
  rssGrowthMbPer100k?: number;
  /** The same difference, not scaled: MiB from the first chunk's end to the last's. */
  rssGrowthMb: number;
  /** The same for the V8 heap in use, which the allocator does not round up to pages. */
  heapUsedGrowthMbPer100k: number;
  /** RSS (MiB) after each chunk of the growth run. */
  rssByChunkMb: number[];
}

/** A full garbage collection, made callable without `--expose-gc` on the command line. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/**
 * Memory of the all-in-one under sustained work: `dispatches` no-op dispatches settled in chunks at
 * full throughput, the projection left to catch up after each, a full GC, then RSS and heap
 * sampled. Memory that grows with the number of dispatches served (a map never pruned, a listener
 * per call) shows as a slope; caches with a bound level off after the first chunk.
 */
export async function benchMemory(
  stack: BenchStack,
  nats: TestNats,
  opts: { quick: boolean; rssAfterMb: number },
): Promise<MemoryResult> {
  const dispatches = opts.quick ? 1_200 : 100_000;
  const chunks = opts.quick ? 3 : 10;
  const chunk = dispatches / chunks;
  const submit = submitter(stack);
  const rss: number[] = [];
  const heap: number[] = [];
  for (let c = 0; c < chunks; c++) {
    const runId = `memory-${c}`;
    const settled = stack.watch.runSettled(runId, chunk);
    await pool(chunk, 256, async () => void (await submit(runId, 0)));
    await untilSettled(settled, stack.watch, nats, `memory chunk ${c} to settle`);
    if (stack.watch.failure) throw new Error(stack.watch.failure);
    await untilProjected(nats, 120_000);
    collectGarbage();
    rss.push(stack.rssMb());
    heap.push(process.memoryUsage().heapUsed / 2 ** 20);
  }
  const per100k = (series: number[]) =>
    round(((series.at(-1)! - series[0]!) / (dispatches - chunk)) * 100_000, 1);
  return {
    rssAfterMb: round(opts.rssAfterMb, 1),
    growthDispatches: dispatches,
    ...(opts.quick ? {} : { rssGrowthMbPer100k: per100k(rss) }),
    rssGrowthMb: round(rss.at(-1)! - rss[0]!, 1),
    heapUsedGrowthMbPer100k: per100k(heap),
    rssByChunkMb: rss.map((r) => round(r, 1)),
  };
}
