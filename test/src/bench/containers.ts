import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  DEFAULT_CONTAINER_LIMITS,
  INPUT_FILE,
  ociConfig,
  RuncBackend,
  type ContainerRequest,
} from '@toolgate/container';
import { makeBusyboxImage } from '@toolgate/testing';
import { median, percentile, round } from './stats';

/** A container tool as the protocol has it: JSON in on stdin, JSON out on stdout (busybox sh). */
const TOOL = ['/bin/sh', '-c', 'read -r input; printf \'{"got":%s}\' "$input"'];
const INPUT = JSON.stringify({ text: 'count these four words' });

export interface ContainersResult {
  containerCommand: string;
  containerSamples: number;
  /** One call through the runc backend as the executor runs it: bundle, run, OOM check, delete. */
  containerP50Ms: number;
  containerP99Ms: number;
  /** The same bundle (same config, rootfs and input) through a plain `runc run`. */
  bareRuncP50Ms: number;
  containerVsRunc: number;
}

/**
 * The container executor's runc backend against plain `runc run` of the same OCI configuration,
 * samples interleaved so machine noise hits both. Returns undefined when runc cannot be used here
 * (not installed, not root, no memory cgroup): the section is then absent.
 */
export async function benchContainers(opts: {
  quick: boolean;
}): Promise<ContainersResult | undefined> {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-bench-ctr-')));
  try {
    const images = path.join(dir, 'images');
    const rootfs = await makeBusyboxImage(images, 'bench/busybox:1');
    const work = path.join(dir, 'work');
    await mkdir(work);
    let backend: RuncBackend;
    try {
      backend = await RuncBackend.open({ images, stateDir: path.join(dir, 'state') });
    } catch (err) {
      process.stderr.write(`bench: containers skipped, no runc here: ${(err as Error).message}\n`);
      return undefined;
    }
    // The bare run's bundle: what the backend writes for the same call, written once.
    const bundle = path.join(dir, 'bundle');
    await mkdir(path.join(bundle, 'input'), { recursive: true });
    await writeFile(path.join(bundle, 'input', 'input.json'), INPUT);
    const limits = backend.limits;
    await writeFile(
      path.join(bundle, 'config.json'),
      JSON.stringify(
        ociConfig({
          rootfs,
          argv: TOOL,
          env: {
            PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
            HOME: '/tmp',
            TMPDIR: '/tmp',
            TOOLGATE_INPUT_FILE: INPUT_FILE,
          },
          workDir: work,
          workWritable: true,
          protectedPaths: [],
          inputDir: path.join(bundle, 'input'),
          network: false,
          memoryBytes: limits.memoryBytes,
          processes: limits.processes,
          cpus: limits.cpus,
          cpuSeconds: limits.cpuSeconds,
          tmpBytes: limits.tmpBytes,
          openFiles: limits.openFiles,
          user: { uid: 0, gid: 0 },
        }),
      ),
    );
    const request: ContainerRequest = {
      image: 'bench/busybox:1',
      argv: TOOL,
      env: {},
      cwd: work,
      writable: true,
      protectedPaths: [],
      network: false,
      input: INPUT,
      timeoutMs: 30_000,
      maxOutputBytes: 256 * 1024,
      labels: { tool: 'bench', dispatchId: 'bench' },
    };
    const expected = `{"got":${INPUT}}`;
    const samples = opts.quick ? 7 : 100;
    const contained: number[] = [];
    const bare: number[] = [];
    for (let i = -5; i < samples; i++) {
      let t = performance.now();
      const a = await backend.run(request);
      const containerMs = performance.now() - t;
      t = performance.now();
      const b = await bareRunc(path.join(dir, 'bare-state'), bundle, `bare-${i + 5}`);
      const bareMs = performance.now() - t;
      if (a.exitCode !== 0 || a.stdout.text() !== expected || b !== expected) {
        throw new Error(`containers bench: the tool failed: ${a.stderr.text()} / ${b}`);
      }
      if (i >= 0) {
        contained.push(containerMs);
        bare.push(bareMs);
      }
    }
    await backend.idle();
    return {
      containerCommand: `busybox sh: read JSON from stdin, write JSON (${DEFAULT_CONTAINER_LIMITS.memoryBytes / 1024 ** 2} MiB, ${limits.processes} pids)`,
      containerSamples: samples,
      containerP50Ms: round(median(contained)),
      containerP99Ms: round(percentile(contained, 99)),
      bareRuncP50Ms: round(median(bare)),
      containerVsRunc: round(median(contained) / median(bare)),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `runc run` of a bundle with the input on stdin; its stdout (runc removes the container). */
function bareRunc(root: string, bundle: string, id: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('runc', ['--root', root, 'run', '--bundle', bundle, id], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stdin.end(INPUT);
    child.once('error', reject);
    child.once('close', () => resolve(out));
  });
}
