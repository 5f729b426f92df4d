import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import {
  MemoryArtifacts,
  MemoryJournal,
  copyRepo,
  makeRepo,
  removeDir,
  steppingClock,
  tempDir,
} from '../../test/git-fixture';
import { removeTreeFiles } from './tree-files';
import { WorktreeManager } from './worktree-manager';

/**
 * The service reads and removes a tree on the host while a call of its agent may still run in it
 * and swap anything there for a link to a host path (renameat2 RENAME_EXCHANGE, as fast as perl
 * goes: each path is always one or the other). Attacked on the effect: no host file's bytes in a
 * stored patch, no host file removed.
 */

const renameat2 = process.arch === 'arm64' ? 276 : 316;

let base: string;
let repo: string;
let template: string;
let journal: MemoryJournal;
let artifacts: MemoryArtifacts;

beforeAll(async () => {
  template = await tempDir('race-template');
  await mkdir(path.join(template, 'repo'));
  await makeRepo(path.join(template, 'repo'));
});
afterAll(async () => {
  if (template) await removeDir(template);
});
beforeEach(async () => {
  base = await tempDir('race');
  repo = path.join(base, 'repo');
  await copyRepo(path.join(template, 'repo'), repo);
  journal = new MemoryJournal();
  artifacts = new MemoryArtifacts();
});
afterEach(async () => {
  await removeDir(base);
});

const open = () =>
  WorktreeManager.open({
    root: path.join(base, 'worktrees'),
    journal,
    artifacts,
    now: steppingClock(),
  });
const spawn = (agentKey: string) => ({
  tenant: 'acme',
  runId: 'run-1',
  agentKey,
  repo,
});

/** Exchanges each pair of paths again and again for `seconds`, in a process of its own. */
function exchanging(pairs: [string, string][], seconds: number) {
  const flat = pairs.flat();
  const racer = execFile('perl', [
    '-e',
    `my $end = time + ${seconds}; while (time < $end) { for (my $i = 0; $i < @ARGV; $i += 2) { syscall(${renameat2}, -100, $ARGV[$i], -100, $ARGV[$i + 1], 2) } }`,
    ...flat,
  ]);
  return { stop: () => racer.kill('SIGKILL') };
}

it('never puts a host file in a patch while a file of the tree is swapped for a link to it', async () => {
  const { manager } = await open();
  const { worktree: wt } = await manager.acquire(spawn('reader'));
  const secret = path.join(base, 'signing.key');
  await writeFile(secret, 'PRIVATE KEY 7f3a\n');
  await writeFile(path.join(wt.path, 'leak'), 'decoy of the same len\n');
  await symlink(secret, path.join(wt.path, 'leak.l'));
  const racer = exchanging([[path.join(wt.path, 'leak'), path.join(wt.path, 'leak.l')]], 20);
  let collected = 0;
  try {
    for (let i = 0; i < 40; i++) {
      const artifact = await manager
        .collect({ worktreeId: wt.worktreeId })
        .catch((err: { code?: string }) => {
          // A file swapped for a directory meanwhile is refused; a link never is.
          expect(err.code).toBe(ErrorCode.Conflict);
          return null;
        });
      if (artifact) collected++;
    }
  } finally {
    racer.stop();
  }
  expect(collected).toBeGreaterThan(0);
  for (const ref of [...artifacts.blobs.keys()]) {
    const patch = Buffer.from((await artifacts.get(ref))!).toString('utf8');
    expect(patch).not.toContain('PRIVATE KEY');
  }
});

it('never removes a host file while folders of the tree are swapped for links to a host folder', async () => {
  const victim = path.join(base, 'state');
  await mkdir(victim);
  for (let i = 0; i < 40; i++) await writeFile(path.join(victim, `key-${i}`), `${i}\n`);
  for (let attempt = 0; attempt < 3; attempt++) {
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire(spawn(`remover-${attempt}`));
    const pairs: [string, string][] = [];
    for (let d = 0; d < 8; d++) {
      const dir = path.join(wt.path, `d${d}`);
      await mkdir(dir);
      for (let f = 0; f < 20; f++) await writeFile(path.join(dir, `f${f}`), 'x\n');
      await symlink(victim, path.join(wt.path, `l${d}`));
      pairs.push([dir, path.join(wt.path, `l${d}`)]);
    }
    const racer = exchanging(pairs, 10);
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' }).catch(() => undefined);
    } finally {
      racer.stop();
    }
    expect((await readdir(victim)).length).toBe(40);
  }
});

it('removes a tree nested deeper than it holds open, and a link as a link', async () => {
  const dir = path.join(base, 'deep');
  let at = dir;
  for (let i = 0; i < 600; i++) at = path.join(at, 'd');
  await mkdir(at, { recursive: true });
  await writeFile(path.join(at, 'leaf'), 'x\n');
  const kept = path.join(base, 'kept');
  await mkdir(kept);
  await writeFile(path.join(kept, 'file'), 'kept\n');
  await symlink(kept, path.join(dir, 'link'));
  await removeTreeFiles(dir, path.join(base, 'spill'));
  expect(await readdir(base)).not.toContain('deep');
  expect(await readdir(path.join(base, 'spill'))).toEqual([]);
  expect(await readFile(path.join(kept, 'file'), 'utf8')).toBe('kept\n');
});

it('disposes a tree whatever a call left nested in it, and starts again over what a crash left', async () => {
  const { manager } = await open();
  const { worktree: wt } = await manager.acquire(spawn('nested'));
  // Deeper than a removal holds open, under names a removal might have used itself.
  for (const top of ['.toolgate-removing-0', 'removing-x', 'spill']) {
    let dir = path.join(wt.path, top);
    for (let i = 0; i < 300; i++) dir = path.join(dir, 'd');
    await mkdir(dir, { recursive: true });
  }
  await writeFile(path.join(wt.path, 'spill', 'file'), 'x\n');
  expect((await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' })).state).toBe(
    'disposed',
  );
  await expect(readdir(wt.path)).rejects.toMatchObject({ code: 'ENOENT' });
  // A crash mid-disposal: the record says `disposing`, the tree still holds the same; and a
  // collect's mirror is left in scratch. The next start finishes both.
  const { worktree: next } = await manager.acquire(spawn('nested-2'));
  let dir = path.join(next.path, 'deep');
  for (let i = 0; i < 300; i++) dir = path.join(dir, 'd');
  await mkdir(dir, { recursive: true });
  const record = path.join(base, 'worktrees', 'state', `${next.worktreeId}.json`);
  const stored = JSON.parse(await readFile(record, 'utf8')) as { state: string };
  await writeFile(record, JSON.stringify({ ...stored, state: 'disposing' }));
  await mkdir(path.join(base, 'worktrees', 'scratch', 'collect-x', 'tree', 'd'), {
    recursive: true,
  });
  const { manager: again } = await open();
  expect(again.get(next.worktreeId)?.state).toBe('disposed');
  await expect(readdir(next.path)).rejects.toMatchObject({ code: 'ENOENT' });
  expect(await readdir(path.join(base, 'worktrees', 'scratch')).catch(() => [])).toEqual([]);
});

it('refuses a collect whose changed files would not fit an event, storing nothing', async () => {
  const { manager } = await open();
  const { worktree: wt } = await manager.acquire(spawn('bulk'));
  const long = 'n'.repeat(120);
  for (let i = 0; i < 2_500; i++) await writeFile(path.join(wt.path, `${long}-${i}`), `${i}\n`);
  await expect(manager.collect({ worktreeId: wt.worktreeId })).rejects.toMatchObject({
    code: ErrorCode.TooLarge,
  });
  expect([...artifacts.blobs.keys()]).toEqual([]);
  expect(manager.get(wt.worktreeId)?.lastArtifact).toBeUndefined();
  expect(await readdir(path.join(base, 'worktrees', 'scratch'))).toEqual([]);
});

/** Every file under `dir` with its size: what an object store holds. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
  return Promise.all(files.map(async (f) => `${f} ${(await stat(f)).size}`)).then((l) => l.sort());
}

it("refuses a collect whose patch is over the limit, and no collect adds to the repository's objects", async () => {
  const { manager } = await open();
  const { worktree: wt } = await manager.acquire(spawn('big'));
  const objects = path.join(repo, '.git', 'objects');
  const before = await filesUnder(objects);
  // Incompressible: its binary patch (deflated, base85) is ~73 MiB, over the 64 MiB a collect stores.
  await writeFile(path.join(wt.path, 'big.bin'), randomBytes(56 * 2 ** 20));
  await expect(manager.collect({ worktreeId: wt.worktreeId })).rejects.toMatchObject({
    code: ErrorCode.TooLarge,
  });
  expect(await filesUnder(objects)).toEqual(before);
  expect([...artifacts.blobs.keys()]).toEqual([]);
  expect(await readdir(path.join(base, 'worktrees', 'scratch'))).toEqual([]);

  // One within the limits is collected, and leaves the objects as they were too.
  await writeFile(path.join(wt.path, 'big.bin'), 'small now\n');
  const collected = await manager.collect({ worktreeId: wt.worktreeId });
  expect(collected.files.map((f) => f.path)).toContain('big.bin');
  expect(await filesUnder(objects)).toEqual(before);
});
