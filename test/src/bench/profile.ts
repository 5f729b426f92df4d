import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector';
import path from 'node:path';

/**
 * `BENCH_PROFILE_DIR=<dir> npm run bench`: each phase wrapped in `profiled` writes a V8 CPU profile
 * of this process while it ran (`<dir>/<phase>.cpuprofile`; read it with
 * `node scripts/cpu-profile-summary.cjs`, or open it in Chrome's DevTools). Start-up and the other
 * phases stay out of it, unlike `node --cpu-prof`. With `BENCH_PROFILE_KIND=heap`, a sampling heap
 * profile instead (`.heapprofile`: what allocated, the garbage collector's work). Without the
 * variable nothing is profiled.
 */
export async function profiled<T>(phase: string, fn: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return fn();
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) =>
      session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))),
    );
  const heap = process.env.BENCH_PROFILE_KIND === 'heap';
  if (heap) {
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', {
      samplingInterval: 16384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  } else {
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 500 });
    await post('Profiler.start');
  }
  try {
    return await fn();
  } finally {
    const { profile } = (await post(heap ? 'HeapProfiler.stopSampling' : 'Profiler.stop')) as {
      profile: unknown;
    };
    session.disconnect();
    await mkdir(dir, { recursive: true });
    const file = `${phase}.${heap ? 'heapprofile' : 'cpuprofile'}`;
    await writeFile(path.join(dir, file), JSON.stringify(profile));
  }
}
