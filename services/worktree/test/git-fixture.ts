import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmod,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  realpath,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { JournalEvent } from '@toolgate/contracts';
import type { ArtifactPort, JournalPort } from '../src/lifecycle/ports';

const run = promisify(execFile);

/** Identity and defaults for commits made by tests: passed with -c, never written globally. */
const GIT_CONFIG = [
  '-c',
  'user.name=Toolgate Test',
  '-c',
  'user.email=test@toolgate.invalid',
  '-c',
  'commit.gpgsign=false',
  '-c',
  'init.defaultBranch=main',
  '-c',
  'core.autocrlf=false',
];

/** Runs git in `cwd` and returns its stdout. */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', [...GIT_CONFIG, ...args], {
    cwd,
    maxBuffer: 256 * 1024 * 1024,
  });
  return stdout;
}

/** A fresh temporary directory (real path); remove it with {@link removeDir}. */
export async function tempDir(label: string): Promise<string> {
  return realpath(await mkdtemp(path.join(os.tmpdir(), `tg-wt-${label}-`)));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Deterministic pseudo-random bytes (binary content that is not valid text). */
export function bytes(seed: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  out[0] = 0; // a NUL byte makes git treat the file as binary
  return out;
}

async function put(root: string, rel: string, content: string | Buffer): Promise<void> {
  const file = path.join(root, rel);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, content);
}

/**
 * A repository with history: three commits on main (text, a binary, an executable, a symlink, a
 * .gitignore), a `feature` branch with a commit of its own, and a tag. `packages` adds a monorepo
 * of `packages × filesPerPackage` source files to the first commit.
 */
export async function makeRepo(
  dir: string,
  { packages = 0, filesPerPackage = 0 }: { packages?: number; filesPerPackage?: number } = {},
): Promise<{ dir: string; commits: string[]; featureCommit: string }> {
  await git(dir, 'init', '-q');
  await put(dir, 'README.md', '# fixture\n');
  await put(dir, '.gitignore', 'node_modules/\n*.log\n');
  await put(dir, 'src/index.ts', 'export const answer = 42;\n');
  await put(
    dir,
    'src/util.ts',
    'export function add(a: number, b: number) {\n  return a + b;\n}\n',
  );
  await put(dir, 'assets/logo.bin', bytes(1, 4096));
  for (let p = 0; p < packages; p++) {
    await put(
      dir,
      `packages/pkg-${p}/package.json`,
      JSON.stringify({ name: `pkg-${p}`, version: '1.0.0' }) + '\n',
    );
    for (let f = 0; f < filesPerPackage; f++) {
      await put(
        dir,
        `packages/pkg-${p}/src/file-${f}.ts`,
        `export const v${p}_${f} = ${p * 1000 + f};\n`,
      );
    }
  }
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'initial');
  const first = (await git(dir, 'rev-parse', 'HEAD')).trim();

  await put(dir, 'scripts/run.sh', '#!/bin/sh\necho run\n');
  await chmod(path.join(dir, 'scripts/run.sh'), 0o755);
  await symlink('../src/index.ts', path.join(dir, 'scripts/index-link.ts'));
  await put(dir, 'src/index.ts', 'export const answer = 43;\n');
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'second');
  const second = (await git(dir, 'rev-parse', 'HEAD')).trim();
  await git(dir, 'tag', 'v1');

  await git(dir, 'checkout', '-q', '-b', 'feature');
  await put(dir, 'src/feature.ts', 'export const feature = true;\n');
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'feature');
  const featureCommit = (await git(dir, 'rev-parse', 'HEAD')).trim();
  await git(dir, 'checkout', '-q', 'main');

  await put(dir, 'docs/guide.md', 'guide\n');
  await put(dir, 'assets/logo.bin', bytes(2, 4096));
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'third');
  const third = (await git(dir, 'rev-parse', 'HEAD')).trim();
  return { dir, commits: [first, second, third], featureCommit };
}

/**
 * A copy of a repository made by {@link makeRepo} (history, refs, modes and symlinks as they are):
 * a spec makes one per file and copies it per test, instead of running makeRepo's twenty-odd git
 * commands each time. The copy is a repository of its own; its commits are the original's.
 */
export async function copyRepo(from: string, to: string): Promise<void> {
  await cp(from, to, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
}

/**
 * Every file under `root` except `.git` and what `ignored` says, as path → a digest of its kind,
 * mode bits that git keeps (executable) and content (a symlink's target). Two trees with equal
 * snapshots are equal byte for byte as git sees them.
 */
export async function snapshotTree(
  root: string,
  ignored: (rel: string) => boolean = () => false,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  async function walk(rel: string): Promise<void> {
    for (const name of await readdir(path.join(root, rel))) {
      const child = rel ? `${rel}/${name}` : name;
      if (name === '.git' || ignored(child)) continue;
      const abs = path.join(root, child);
      const st = await lstat(abs);
      if (st.isSymbolicLink()) out.set(child, `link:${await readlink(abs)}`);
      else if (st.isDirectory()) await walk(child);
      else {
        const digest = createHash('sha256')
          .update(await readFile(abs))
          .digest('hex');
        out.set(child, `file:${st.mode & 0o111 ? 'x' : '-'}:${digest}`);
      }
    }
  }
  await walk('');
  return out;
}

/** A journal port that keeps what it is given, in order (an in-memory implementation, not a mock). */
export class MemoryJournal implements JournalPort {
  readonly events: JournalEvent[] = [];
  async append(event: JournalEvent): Promise<void> {
    this.events.push(event);
  }
  types(worktreeId?: string): string[] {
    return this.events
      .filter((e) => worktreeId === undefined || e.dispatchId === worktreeId)
      .map((e) => e.type);
  }
}

/** An artifact port over a Map. */
export class MemoryArtifacts implements ArtifactPort {
  readonly blobs = new Map<string, Uint8Array>();
  async put(ref: string, data: Uint8Array): Promise<void> {
    this.blobs.set(ref, new Uint8Array(data));
  }
  async get(ref: string): Promise<Uint8Array | null> {
    return this.blobs.get(ref) ?? null;
  }
}

/** A clock that advances one second per reading, so ordering by time is deterministic. */
export function steppingClock(start = Date.parse('2030-01-01T00:00:00Z')): () => Date {
  let t = start;
  return () => new Date((t += 1000));
}
