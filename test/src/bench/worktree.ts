import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type { JournalEvent } from '@toolgate/contracts';
import { WorktreeManager } from '@toolgate/worktree';
import { median, round } from './stats';

const run = promisify(execFile);

/** The repository size BENCH.md reports worktree figures for (a quick run's is smaller). */
const FILES = 5000;
const QUICK_FILES = 500;
const GIT_IDENTITY = [
  '-c',
  'user.name=Toolgate Bench',
  '-c',
  'user.email=bench@toolgate.invalid',
  '-c',
  'commit.gpgsign=false',
];

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', [...GIT_IDENTITY, ...args], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** A repository of `files` small source files in 50 directories, one commit. */
async function makeRepo(dir: string, files: number): Promise<void> {
  await git(dir, 'init', '-q', '-b', 'main');
  const perDir = Math.ceil(files / 50);
  for (let d = 0; d < 50; d++) {
    const sub = path.join(dir, 'packages', `pkg-${d}`, 'src');
    await mkdir(sub, { recursive: true });
    const writes: Promise<void>[] = [];
    for (let f = 0; f < perDir && d * perDir + f < files; f++) {
      writes.push(
        writeFile(path.join(sub, `file-${f}.ts`), `export const v${d}_${f} = ${d * perDir + f};\n`),
      );
    }
    await Promise.all(writes);
  }
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'bench fixture');
}

/**
 * Worktree acquire and collect on a repository of 5,000 files (1,000 in a quick run: `files`). `gitWorktreeAddMs` is plain
 * `git worktree add` on the same repository in the same run, samples interleaved with the
 * service's acquires so machine noise hits both alike; `acquireVsGit` is their ratio (BENCH.md).
 * The lifecycle runs with in-memory journal and artifact ports: the figure is the git and volume
 * work, not NATS (the journal's own publish rate is measured in the baseline section).
 */
export async function benchWorktree(opts: { quick: boolean }): Promise<{
  files: number;
  acquireMs: number;
  gitWorktreeAddMs: number;
  acquireVsGit: number;
  collectMs: number;
  /** Timed rounds (medians of each). */
  samples: number;
}> {
  const samples = opts.quick ? 2 : 5;
  const base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-bench-worktree-')));
  try {
    const repo = path.join(base, 'repo');
    await mkdir(repo);
    await makeRepo(repo, opts.quick ? QUICK_FILES : FILES);
    const files = (await git(repo, 'ls-files')).split('\n').filter(Boolean).length;

    const events: JournalEvent[] = [];
    const blobs = new Map<string, Uint8Array>();
    const { manager } = await WorktreeManager.open({
      root: path.join(base, 'worktrees'),
      journal: { append: async (e: JournalEvent) => void events.push(e) },
      artifacts: {
        put: async (ref: string, b: Uint8Array) => void blobs.set(ref, b),
        get: async (ref: string) => blobs.get(ref) ?? null,
      },
    });

    // The plain worktrees are removed after the rounds, one git command for all of them (each
    // spawn costs this machine tens of milliseconds, beside the other sections of a quick run).
    const plainTrees: string[] = [];
    const gitTimes: number[] = [];
    const acquireTimes: number[] = [];
    // One untimed round of each warms the page cache and git's object lookup.
    for (let i = -1; i < samples; i++) {
      const plain = path.join(base, `plain-${i + 1}`);
      let t = performance.now();
      await git(repo, 'worktree', 'add', '--quiet', '-b', `bench-${i + 1}`, plain, 'HEAD');
      const gitMs = performance.now() - t;
      plainTrees.push(plain);

      t = performance.now();
      const { worktree } = await manager.acquire({
        tenant: 'bench',
        runId: 'run',
        agentKey: `agent-${i + 1}`,
        repo,
      });
      const acquireMs = performance.now() - t;
      await manager.dispose({ worktreeId: worktree.worktreeId, outcome: 'ok' });
      if (i >= 0) {
        gitTimes.push(gitMs);
        acquireTimes.push(acquireMs);
      }
    }

    await Promise.all(plainTrees.map((p) => rm(p, { recursive: true, force: true })));
    await git(repo, 'worktree', 'prune');
    await git(repo, 'branch', '-D', ...plainTrees.map((_, i) => `bench-${i}`));

    // Collect after a typical agent's edit: 50 modified, 10 new, 10 deleted files and a binary.
    const { worktree } = await manager.acquire({
      tenant: 'bench',
      runId: 'run',
      agentKey: 'collector',
      repo,
    });
    for (let f = 0; f < 50; f++) {
      await writeFile(
        path.join(worktree.path, 'packages', `pkg-${f}`, 'src', 'file-1.ts'),
        `export const changed = ${f};\n`,
      );
    }
    for (let f = 0; f < 10; f++) {
      await writeFile(path.join(worktree.path, `new-${f}.ts`), `export const added = ${f};\n`);
      await rm(path.join(worktree.path, 'packages', `pkg-${f}`, 'src', 'file-2.ts'));
    }
    await writeFile(
      path.join(worktree.path, 'blob.bin'),
      Buffer.from([0, 1, 2, 3, 255, 254, 0, 9]),
    );
    const collectTimes: number[] = [];
    for (let i = -1; i < samples; i++) {
      const t = performance.now();
      await manager.collect({ worktreeId: worktree.worktreeId });
      if (i >= 0) collectTimes.push(performance.now() - t);
    }
    await manager.dispose({ worktreeId: worktree.worktreeId, outcome: 'ok' });

    const acquireMs = median(acquireTimes);
    const gitWorktreeAddMs = median(gitTimes);
    return {
      files,
      acquireMs: round(acquireMs),
      gitWorktreeAddMs: round(gitWorktreeAddMs),
      acquireVsGit: round(acquireMs / gitWorktreeAddMs),
      collectMs: round(median(collectTimes)),
      samples,
    };
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}
