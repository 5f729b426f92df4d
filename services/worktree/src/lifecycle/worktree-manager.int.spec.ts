import {
  mkdir,
  readFile,
  readdir,
  rename,
  rm,
  symlink,
  writeFile,
  stat,
  chmod,
} from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, parseJournalEvent } from '@toolgate/contracts';
import { resolveInside } from '@toolgate/worktree-guard';
import {
  MemoryArtifacts,
  MemoryJournal,
  bytes,
  copyRepo,
  git,
  makeRepo,
  removeDir,
  snapshotTree,
  steppingClock,
  tempDir,
} from '../../test/git-fixture';
import { WorktreeManager, type WorktreeManagerOptions } from './worktree-manager';

let base: string;
let repo: string;
let root: string;
let journal: MemoryJournal;
let artifacts: MemoryArtifacts;
let commits: string[];
let featureCommit: string;

/** The fixture repository, made once per file; each test gets a copy of it. */
let template: string;

beforeAll(async () => {
  template = await tempDir('mgr-template');
  await mkdir(path.join(template, 'repo'));
  ({ commits, featureCommit } = await makeRepo(path.join(template, 'repo')));
});

afterAll(async () => {
  if (template) await removeDir(template);
});

beforeEach(async () => {
  base = await tempDir('mgr');
  repo = path.join(base, 'repo');
  root = path.join(base, 'worktrees');
  await copyRepo(path.join(template, 'repo'), repo);
  journal = new MemoryJournal();
  artifacts = new MemoryArtifacts();
});

afterEach(async () => {
  await removeDir(base);
});

async function open(extra: Partial<WorktreeManagerOptions> = {}) {
  return WorktreeManager.open({ root, journal, artifacts, now: steppingClock(), ...extra });
}

const spawn = (agentKey: string, more: { ref?: string } = {}) => ({
  tenant: 'acme',
  runId: 'run-1',
  agentKey,
  repo,
  ...more,
});

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeDefined();
  expect((caught as { code?: unknown }).code).toBe(code);
}

async function worktreePaths(): Promise<string[]> {
  const out = await git(repo, 'worktree', 'list', '--porcelain');
  return out
    .split('\n')
    .filter((l) => l.startsWith('worktree '))
    .map((l) => l.slice('worktree '.length));
}

async function branchExists(branch: string): Promise<boolean> {
  const out = await git(repo, 'branch', '--list', branch);
  return out.trim().length > 0;
}

describe('WorktreeManager lifecycle', () => {
  it('acquires, collects and disposes a tree, journaling each step', async () => {
    const { manager } = await open();
    const first = await manager.acquire(spawn('agent-a'));
    expect(first.created).toBe(true);
    const wt = first.worktree;
    expect(wt.baseCommit).toBe(commits[2]);
    expect(wt.state).toBe('active');
    expect(wt.path.startsWith(path.join(base, 'worktrees', 'trees'))).toBe(true);
    expect((await git(wt.path, 'rev-parse', 'HEAD')).trim()).toBe(commits[2]);
    expect((await git(wt.path, 'rev-parse', '--abbrev-ref', 'HEAD')).trim()).toBe(wt.branch);
    expect(await worktreePaths()).toContain(wt.path);

    // Acquiring again for the same spawn hands out the same tree.
    const again = await manager.acquire(spawn('agent-a'));
    expect(again.created).toBe(false);
    expect(again.worktree.worktreeId).toBe(wt.worktreeId);
    // Handing it out again publishes nothing: the journal already has the acquisition.
    expect(journal.types(wt.worktreeId)).toEqual(['worktree-acquired']);

    await writeFile(path.join(wt.path, 'src/index.ts'), 'export const answer = 44;\n');
    await rm(path.join(wt.path, 'docs/guide.md'));
    await rename(path.join(wt.path, 'src/util.ts'), path.join(wt.path, 'src/math.ts'));
    await writeFile(path.join(wt.path, 'NEW.md'), 'untracked\n');
    await writeFile(path.join(wt.path, 'staged.txt'), 'staged\n');
    await git(wt.path, 'add', 'staged.txt');
    await writeFile(path.join(wt.path, 'assets/logo.bin'), bytes(3, 5000));
    await writeFile(path.join(wt.path, 'assets/new.bin'), bytes(4, 100));
    await writeFile(path.join(wt.path, 'debug.log'), 'ignored\n');
    const statusBefore = await git(wt.path, 'status', '--porcelain=v1', '-z');

    const artifact = await manager.collect({ worktreeId: wt.worktreeId });
    expect(artifact.kind).toBe('patch');
    expect(artifact.baseCommit).toBe(commits[2]);
    const byPath = Object.fromEntries(artifact.files.map((f) => [f.path, f]));
    expect(byPath).toEqual({
      'src/index.ts': { path: 'src/index.ts', status: 'modified', binary: false },
      'docs/guide.md': { path: 'docs/guide.md', status: 'deleted', binary: false },
      'src/math.ts': { path: 'src/math.ts', status: 'renamed', from: 'src/util.ts', binary: false },
      'NEW.md': { path: 'NEW.md', status: 'untracked', binary: false },
      'staged.txt': { path: 'staged.txt', status: 'added', binary: false },
      'assets/logo.bin': { path: 'assets/logo.bin', status: 'modified', binary: true },
      'assets/new.bin': { path: 'assets/new.bin', status: 'untracked', binary: true },
    });
    const stored = await artifacts.get(artifact.ref);
    expect(stored).not.toBeNull();
    expect(stored!.byteLength).toBe(artifact.bytes);
    expect(Buffer.from(stored!).toString('latin1')).toContain('GIT binary patch');
    // The agent's tree and index are exactly as it left them.
    expect(await git(wt.path, 'status', '--porcelain=v1', '-z')).toBe(statusBefore);
    // Never auto-applied: the host tree is untouched.
    expect((await git(repo, 'status', '--porcelain')).trim()).toBe('');

    const disposed = await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' });
    expect(disposed.state).toBe('disposed');
    await expect(stat(wt.path)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await worktreePaths()).not.toContain(wt.path);
    expect(await branchExists(wt.branch)).toBe(false);
    // Disposing again answers the final state.
    expect((await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' })).state).toBe(
      'disposed',
    );
    await expectCode(manager.collect({ worktreeId: wt.worktreeId }), ErrorCode.Conflict);

    // Each transition journaled once, disposing again included.
    expect(journal.types(wt.worktreeId)).toEqual([
      'worktree-acquired',
      'worktree-collected',
      'worktree-disposed',
    ]);
    for (const event of journal.events) expect(parseJournalEvent(event)).not.toBeNull();
    // Re-journaled transitions keep their ids, so the broker deduplicates them.
    const ids = journal.events.map((e) => e.id);
    expect(new Set(ids).size).toBe(new Set(journal.events.map((e) => `${e.type}|${e.id}`)).size);
  });

  it('acquires from a branch, a tag and a commit, and refuses unknown refs and non-git hosts', async () => {
    const { manager } = await open();
    expect((await manager.acquire(spawn('b', { ref: 'feature' }))).worktree.baseCommit).toBe(
      featureCommit,
    );
    expect((await manager.acquire(spawn('t', { ref: 'v1' }))).worktree.baseCommit).toBe(commits[1]);
    expect((await manager.acquire(spawn('c', { ref: commits[0]! }))).worktree.baseCommit).toBe(
      commits[0],
    );
    const featureTree = manager.list().find((w) => w.agentKey === 'b')!;
    expect(await readFile(path.join(featureTree.path, 'src/feature.ts'), 'utf8')).toContain(
      'feature',
    );

    await expectCode(manager.acquire(spawn('u', { ref: 'no-such-branch' })), ErrorCode.Config);
    await expectCode(manager.acquire(spawn('o', { ref: '--output=/tmp/x' })), ErrorCode.Config);

    const plain = path.join(base, 'not-a-repo');
    await mkdir(plain);
    await expectCode(manager.acquire({ ...spawn('n'), repo: plain }), ErrorCode.Config);
    await expectCode(
      manager.acquire({ ...spawn('m'), repo: path.join(base, 'missing') }),
      ErrorCode.Config,
    );
    await expectCode(manager.acquire({ ...spawn('bad'), tenant: 'a.b' }), ErrorCode.InvalidRequest);

    // A root inside the host repository would nest trees in the host's working tree.
    const { manager: inside } = await WorktreeManager.open({
      root: path.join(repo, '.trees'),
      journal,
      artifacts,
    });
    await expectCode(inside.acquire(spawn('i')), ErrorCode.Config);
    // Failed acquires leave no tree and no record behind.
    expect(
      manager
        .list()
        .map((w) => w.agentKey)
        .sort(),
    ).toEqual(['b', 'c', 't']);
  });

  it('collects commits the agent made on its branch together with uncommitted work', async () => {
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire(spawn('committer'));
    await writeFile(path.join(wt.path, 'committed.txt'), 'one\n');
    await git(wt.path, 'add', 'committed.txt');
    await git(wt.path, 'commit', '-q', '-m', 'agent commit');
    await writeFile(path.join(wt.path, 'committed.txt'), 'one\ntwo\n');
    const artifact = await manager.collect({ worktreeId: wt.worktreeId });
    expect(artifact.files).toEqual([{ path: 'committed.txt', status: 'added', binary: false }]);
    const patch = Buffer.from((await artifacts.get(artifact.ref))!).toString('utf8');
    expect(patch).toContain('+two');
  });

  it('collects an empty patch for an untouched tree', async () => {
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire(spawn('idle'));
    const artifact = await manager.collect({ worktreeId: wt.worktreeId });
    expect(artifact.files).toEqual([]);
    expect(artifact.bytes).toBe(0);
  });
});

describe('keepOnError and the pin cap', () => {
  it('retains failed trees, drops the oldest past the cap, and restarts an agent whose tree was dropped', async () => {
    const { manager } = await open({ pinCap: 2 });
    const trees = [];
    for (const key of ['k0', 'k1', 'k2', 'k3'])
      trees.push((await manager.acquire(spawn(key))).worktree);
    const [t0, t1, t2, t3] = trees as [
      (typeof trees)[0],
      (typeof trees)[0],
      (typeof trees)[0],
      (typeof trees)[0],
    ];

    // A failure without keepOnError is disposed like a success.
    expect((await manager.dispose({ worktreeId: t3.worktreeId, outcome: 'error' })).state).toBe(
      'disposed',
    );
    // keepOnError only applies to failures.
    expect(
      (await manager.dispose({ worktreeId: t2.worktreeId, outcome: 'ok', keepOnError: true }))
        .state,
    ).toBe('disposed');

    const r0 = await manager.dispose({
      worktreeId: t0.worktreeId,
      outcome: 'error',
      keepOnError: true,
      reason: 'tests failed',
    });
    expect(r0.state).toBe('retained');
    expect((await stat(t0.path)).isDirectory()).toBe(true);
    await manager.dispose({ worktreeId: t1.worktreeId, outcome: 'error', keepOnError: true });

    const t4 = (await manager.acquire(spawn('k4'))).worktree;
    await manager.dispose({ worktreeId: t4.worktreeId, outcome: 'error', keepOnError: true });
    // Three retained with a cap of two: the oldest (t0) was dropped.
    expect(manager.get(t0.worktreeId)!.state).toBe('dropped');
    expect(manager.get(t0.worktreeId)!.droppedReason).toBe('pin-cap');
    await expect(stat(t0.path)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await branchExists(t0.branch)).toBe(false);
    expect(manager.get(t1.worktreeId)!.state).toBe('retained');
    expect(manager.get(t4.worktreeId)!.state).toBe('retained');
    const dropped = journal.events.find((e) => e.type === 'worktree-dropped');
    expect(dropped).toMatchObject({ dispatchId: t0.worktreeId, reason: 'pin-cap' });
    expect(journal.types(t0.worktreeId)).toContain('worktree-retained');

    // The dropped agent resumes: it gets a fresh tree and is told to restart.
    const resumed = await manager.acquire(spawn('k0'));
    expect(resumed.created).toBe(true);
    expect(resumed.restarted).toEqual({
      droppedWorktreeId: t0.worktreeId,
      reason: expect.stringContaining('pin-cap'),
    });
    expect(resumed.worktree.worktreeId).not.toBe(t0.worktreeId);
    expect(resumed.worktree.generation).toBe(1);
    const restartedEvent = journal.events.find((e) => e.type === 'worktree-restarted');
    expect(restartedEvent).toMatchObject({
      dispatchId: resumed.worktree.worktreeId,
      droppedWorktreeId: t0.worktreeId,
      agentKey: 'k0',
    });

    // A retained agent resumes into its kept tree, which is no longer pinned.
    const back = await manager.acquire(spawn('k1'));
    expect(back.created).toBe(false);
    expect(back.restarted).toBeUndefined();
    expect(back.worktree.worktreeId).toBe(t1.worktreeId);
    expect(back.worktree.state).toBe('active');

    // A disposed agent that acquires again gets a fresh tree without a restart.
    const fresh = await manager.acquire(spawn('k3'));
    expect(fresh.created).toBe(true);
    expect(fresh.restarted).toBeUndefined();
  });

  it('uses a default pin cap of 4', async () => {
    const { manager } = await open({ keepOnError: true });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { worktree } = await manager.acquire(spawn(`p${i}`));
      ids.push(worktree.worktreeId);
      await manager.dispose({ worktreeId: worktree.worktreeId, outcome: 'error' });
    }
    expect(ids.map((id) => manager.get(id)!.state)).toEqual([
      'dropped',
      'retained',
      'retained',
      'retained',
      'retained',
    ]);
  });
});

describe('concurrency', () => {
  it('serves 8 parallel acquires on one repository, and one tree for parallel acquires of one spawn', async () => {
    const { manager } = await open();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => manager.acquire(spawn(`par-${i}`))),
    );
    const paths = new Set(results.map((r) => r.worktree.path));
    expect(paths.size).toBe(8);
    const listed = await worktreePaths();
    for (const p of paths) expect(listed).toContain(p);
    for (const r of results)
      expect((await git(r.worktree.path, 'rev-parse', 'HEAD')).trim()).toBe(commits[2]);

    const same = await Promise.all(Array.from({ length: 8 }, () => manager.acquire(spawn('one'))));
    expect(new Set(same.map((r) => r.worktree.worktreeId)).size).toBe(1);
    expect(same.filter((r) => r.created)).toHaveLength(1);

    await Promise.all(
      results.map((r) => manager.dispose({ worktreeId: r.worktree.worktreeId, outcome: 'ok' })),
    );
    expect((await worktreePaths()).length).toBe(2); // the main tree and 'one'
  });
});

describe('crash recovery', () => {
  it('re-adopts live trees after a crash between acquire and dispose', async () => {
    const first = await open({ pinCap: 4 });
    const { worktree: wt } = await first.manager.acquire(spawn('survivor'));
    await writeFile(path.join(wt.path, 'work.txt'), 'in progress\n');
    const { worktree: kept } = await first.manager.acquire(spawn('kept'));
    await first.manager.dispose({
      worktreeId: kept.worktreeId,
      outcome: 'error',
      keepOnError: true,
    });
    // The process dies here: no dispose. A new manager starts over the same root.

    const journal2 = new MemoryJournal();
    const second = await open({ journal: journal2 });
    expect(second.recovery.adopted).toEqual([wt.worktreeId]);
    expect(second.recovery.retained).toEqual([kept.worktreeId]);
    expect(second.recovery.dropped).toEqual([]);

    const again = await second.manager.acquire(spawn('survivor'));
    expect(again.created).toBe(false);
    expect(again.worktree.worktreeId).toBe(wt.worktreeId);
    const artifact = await second.manager.collect({ worktreeId: wt.worktreeId });
    expect(artifact.files).toEqual([{ path: 'work.txt', status: 'untracked', binary: false }]);
    await second.manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' });
    await expect(stat(wt.path)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await branchExists(wt.branch)).toBe(false);
    expect(journal2.types(wt.worktreeId)).toEqual([
      'worktree-acquired',
      'worktree-collected',
      'worktree-disposed',
    ]);
  });

  it('prunes stale trees, drops vanished ones and restarts their agents', async () => {
    const first = await open();
    const { worktree: gone } = await first.manager.acquire(spawn('gone'));
    const { worktree: hijacked } = await first.manager.acquire(spawn('hijacked'));
    // While the service is down: one tree is deleted by hand, one has its .git file redirected,
    // and a directory nobody recorded appears under the root.
    await rm(gone.path, { recursive: true, force: true });
    await writeFile(path.join(hijacked.path, '.git'), `gitdir: ${path.join(repo, '.git')}\n`);
    const orphan = path.join(root, 'trees', 'wt_orphan_g0');
    await mkdir(orphan, { recursive: true });
    await writeFile(path.join(orphan, 'x'), 'x');

    const journal2 = new MemoryJournal();
    const second = await open({ journal: journal2 });
    expect(second.recovery.dropped).toEqual(
      expect.arrayContaining([
        { worktreeId: gone.worktreeId, reason: 'missing' },
        { worktreeId: hijacked.worktreeId, reason: 'stale' },
      ]),
    );
    expect(second.recovery.removedStale).toContain('wt_orphan_g0');
    await expect(stat(orphan)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await worktreePaths()).toEqual([repo]);
    expect(await branchExists(gone.branch)).toBe(false);
    // The host repository's own metadata was not touched by the hijack attempt.
    expect((await git(repo, 'status', '--porcelain')).trim()).toBe('');

    const resumed = await second.manager.acquire(spawn('gone'));
    expect(resumed.restarted?.droppedWorktreeId).toBe(gone.worktreeId);
    expect(journal2.types(resumed.worktree.worktreeId)).toEqual([
      'worktree-restarted',
      'worktree-acquired',
    ]);
  });

  it('finishes a disposal and cleans a half-made tree a crash interrupted', async () => {
    const first = await open();
    const { worktree: wt } = await first.manager.acquire(spawn('half-disposed'));
    const { worktree: wt2 } = await first.manager.acquire(spawn('half-made'));
    // Rewrite the records as a crash would have left them mid-operation.
    const stateFile = (id: string) => path.join(root, 'state', `${id}.json`);
    const disposing = JSON.parse(await readFile(stateFile(wt.worktreeId), 'utf8'));
    await writeFile(
      stateFile(wt.worktreeId),
      JSON.stringify({ ...disposing, state: 'disposing', journaled: false }),
    );
    const creating = JSON.parse(await readFile(stateFile(wt2.worktreeId), 'utf8'));
    await writeFile(
      stateFile(wt2.worktreeId),
      JSON.stringify({ ...creating, state: 'creating', gitDir: null }),
    );
    await writeFile(path.join(root, 'state', 'garbage.json'), '{not json');

    const journal2 = new MemoryJournal();
    const second = await open({ journal: journal2 });
    expect(second.recovery.finished).toEqual([wt.worktreeId]);
    expect(second.recovery.removedStale).toContain(wt2.worktreeId);
    expect(second.recovery.corrupt).toEqual(['garbage.json']);
    expect(journal2.types(wt.worktreeId)).toEqual(['worktree-disposed']);
    expect(journal2.types(wt2.worktreeId)).toEqual([]);
    expect(await worktreePaths()).toEqual([repo]);
    // The half-made tree's agent retries its acquire and gets the same id, as the first time.
    const retried = await second.manager.acquire(spawn('half-made'));
    expect(retried.worktree.worktreeId).toBe(wt2.worktreeId);
    expect(retried.restarted).toBeUndefined();
  });
  it('re-journals a transition whose event a failed append kept from the journal', async () => {
    // A journal that is down for the first disposed event, as a broker outage would be.
    let refuse = true;
    const flaky = new MemoryJournal();
    const outage = {
      append: async (event: Parameters<MemoryJournal['append']>[0]) => {
        if (event.type === 'worktree-disposed' && refuse) {
          refuse = false;
          throw new Error('journal unavailable');
        }
        await flaky.append(event);
      },
    };
    const first = await open({ journal: outage });
    const { worktree: wt } = await first.manager.acquire(spawn('flaky'));
    await expect(
      first.manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' }),
    ).rejects.toThrow('journal unavailable');
    // The tree is gone on disk even though the journal never heard of it.
    await expect(stat(wt.path)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(flaky.types(wt.worktreeId)).toEqual(['worktree-acquired']);

    // The process dies; on start the disposal is journaled after all.
    const journal2 = new MemoryJournal();
    await open({ journal: journal2 });
    expect(journal2.types(wt.worktreeId)).toEqual(['worktree-disposed']);
    expect(journal2.events[0]!.id).toBe(`${wt.worktreeId}:disposed`);

    // Caught up once: the next start has nothing left to journal.
    const journal3 = new MemoryJournal();
    await open({ journal: journal3 });
    expect(journal3.types(wt.worktreeId)).toEqual([]);
  });

  it('journals on a retried dispose what a failed append kept from the journal, once', async () => {
    let refuse = true;
    const kept = new MemoryJournal();
    const { manager } = await open({
      journal: {
        append: async (event) => {
          if (event.type === 'worktree-disposed' && refuse) {
            refuse = false;
            throw new Error('journal unavailable');
          }
          await kept.append(event);
        },
      },
    });
    const { worktree: wt } = await manager.acquire(spawn('retried'));
    await expect(manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' })).rejects.toThrow(
      'journal unavailable',
    );
    expect((await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' })).state).toBe(
      'disposed',
    );
    expect((await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' })).state).toBe(
      'disposed',
    );
    expect(kept.types(wt.worktreeId)).toEqual(['worktree-acquired', 'worktree-disposed']);
  });
});

describe('safety', () => {
  it('refuses symlink escapes planted in a tree and keeps links as links in the patch', async () => {
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire(spawn('sly'));
    const secret = path.join(base, 'secret.txt');
    await writeFile(secret, 'secret\n');
    await symlink(secret, path.join(wt.path, 'leak'));
    await symlink(base, path.join(wt.path, 'src/up'));

    await expect(resolveInside(wt.path, 'leak')).rejects.toMatchObject({
      code: ErrorCode.PathOutsideScope,
    });
    await expect(resolveInside(wt.path, 'src/up/secret.txt')).rejects.toMatchObject({
      code: ErrorCode.PathOutsideScope,
    });
    await expect(resolveInside(wt.path, '../repo/README.md')).rejects.toMatchObject({
      code: ErrorCode.PathOutsideScope,
    });
    await expect(resolveInside(wt.path, path.join(repo, 'README.md'))).rejects.toMatchObject({
      code: ErrorCode.PathOutsideScope,
    });
    await expect(resolveInside(wt.path, '.git')).rejects.toMatchObject({
      code: ErrorCode.PathOutsideScope,
    });
    expect(await resolveInside(wt.path, 'src/index.ts')).toBe(path.join(wt.path, 'src/index.ts'));

    const artifact = await manager.collect({ worktreeId: wt.worktreeId });
    expect(artifact.files.map((f) => f.path).sort()).toEqual(['leak', 'src/up']);
    const patch = Buffer.from((await artifacts.get(artifact.ref))!).toString('utf8');
    expect(patch).toContain('new file mode 120000');
    expect(patch).not.toContain('secret\n');
  });

  it('runs no hook the repository names, wherever its config points them', async () => {
    // What a tool that reached the host repository's config would leave: hooks in a folder of its
    // own (`core.hooksPath`) and in the default one, each leaving a mark when run.
    const marks = path.join(base, 'marks');
    const hooks = path.join(base, 'planted-hooks');
    await mkdir(marks);
    await mkdir(hooks);
    const names = ['post-checkout', 'reference-transaction', 'pre-commit', 'post-index-change'];
    for (const dir of [hooks, path.join(repo, '.git', 'hooks')]) {
      await mkdir(dir, { recursive: true });
      for (const name of names) {
        await writeFile(path.join(dir, name), `#!/bin/sh\ntouch ${marks}/${name}-$$\n`);
        await chmod(path.join(dir, name), 0o755);
      }
    }
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire(spawn('hooked'));
    await writeFile(path.join(wt.path, 'src/index.ts'), 'export const answer = 45;\n');
    await manager.collect({ worktreeId: wt.worktreeId });
    await git(repo, 'config', 'core.hooksPath', hooks);
    const { worktree: other } = await manager.acquire(spawn('hooked-2'));
    await manager.collect({ worktreeId: other.worktreeId });
    await manager.dispose({ worktreeId: wt.worktreeId, outcome: 'ok' });
    await manager.dispose({ worktreeId: other.worktreeId, outcome: 'ok' });
    expect(await readdir(marks)).toEqual([]);
  });

  it('refuses to collect from a tree whose .git file points elsewhere, or that nests a repository', async () => {
    const { manager } = await open();
    const other = path.join(base, 'other');
    await mkdir(other);
    await git(other, 'init', '-q');
    const { worktree: wt } = await manager.acquire(spawn('redirect'));
    const original = await readFile(path.join(wt.path, '.git'), 'utf8');
    await writeFile(path.join(wt.path, '.git'), `gitdir: ${path.join(other, '.git')}\n`);
    await expectCode(manager.collect({ worktreeId: wt.worktreeId }), ErrorCode.PathOutsideScope);
    expect((await git(other, 'status', '--porcelain')).trim()).toBe('');
    await writeFile(path.join(wt.path, '.git'), original);

    const nested = path.join(wt.path, 'vendor/lib');
    await mkdir(nested, { recursive: true });
    await git(nested, 'init', '-q');
    await writeFile(path.join(nested, 'a.txt'), 'a\n');
    await git(nested, 'add', 'a.txt');
    await git(nested, 'commit', '-q', '-m', 'nested');
    await expectCode(manager.collect({ worktreeId: wt.worktreeId }), ErrorCode.PathOutsideScope);
  });
});

describe('patch round-trip', () => {
  it('reproduces the tree byte for byte when the patch is applied to a clean checkout of the base', async () => {
    const mono = path.join(base, 'mono');
    await mkdir(mono);
    const { commits: monoCommits } = await makeRepo(mono, { packages: 12, filesPerPackage: 25 });
    expect(
      Number((await git(mono, 'ls-files')).split('\n').filter(Boolean).length),
    ).toBeGreaterThan(300);
    const { manager } = await open();
    const { worktree: wt } = await manager.acquire({
      tenant: 'acme',
      runId: 'run-1',
      agentKey: 'mono',
      repo: mono,
      ref: monoCommits[1]!,
    });

    const w = (rel: string, content: string | Buffer) =>
      writeFile(path.join(wt.path, rel), content);
    for (let p = 0; p < 12; p += 2) {
      await w(`packages/pkg-${p}/src/file-3.ts`, `export const changed = ${p};\n`);
      await rm(path.join(wt.path, `packages/pkg-${p}/src/file-4.ts`));
      await rename(
        path.join(wt.path, `packages/pkg-${p}/src/file-5.ts`),
        path.join(wt.path, `packages/pkg-${p}/src/moved-5.ts`),
      );
    }
    await mkdir(path.join(wt.path, 'packages/pkg-new/src'), { recursive: true });
    await w('packages/pkg-new/src/index.ts', 'export {};\n');
    await w('assets/logo.bin', bytes(9, 10_000));
    await w('assets/extra.bin', bytes(10, 3000));
    await rm(path.join(wt.path, 'src/util.ts'));
    await w('no-newline.txt', 'no trailing newline');
    await w('crlf.txt', 'line one\r\nline two\r\n');
    await w('empty.txt', '');
    await w('name with spaces ünïcode.md', 'odd name\n');
    await w('latin1.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    await chmod(path.join(wt.path, 'scripts/run.sh'), 0o644);
    await w('scripts/new.sh', '#!/bin/sh\n');
    await chmod(path.join(wt.path, 'scripts/new.sh'), 0o755);
    await rm(path.join(wt.path, 'scripts/index-link.ts'));
    await symlink('../README.md', path.join(wt.path, 'scripts/index-link.ts'));
    await mkdir(path.join(wt.path, 'node_modules/dep'), { recursive: true });
    await w('node_modules/dep/index.js', 'ignored\n');

    const artifact = await manager.collect({ worktreeId: wt.worktreeId });
    const patch = (await artifacts.get(artifact.ref))!;
    expect(artifact.files.find((f) => f.path === 'assets/logo.bin')).toMatchObject({
      status: 'modified',
      binary: true,
    });
    expect(artifact.files.find((f) => f.path === 'packages/pkg-0/src/moved-5.ts')).toMatchObject({
      status: 'renamed',
      from: 'packages/pkg-0/src/file-5.ts',
    });
    expect(artifact.files.some((f) => f.path.startsWith('node_modules/'))).toBe(false);

    const clean = path.join(base, 'clean');
    await git(base, 'clone', '-q', '--no-checkout', mono, clean);
    await git(clean, 'checkout', '-q', '--detach', artifact.baseCommit);
    const patchFile = path.join(base, 'agent.patch');
    await writeFile(patchFile, patch);
    await git(clean, 'apply', '--check', patchFile);
    await git(clean, 'apply', '--binary', patchFile);

    const ignored = (rel: string) => rel === 'node_modules' || rel.startsWith('node_modules/');
    const expected = await snapshotTree(wt.path, ignored);
    const actual = await snapshotTree(clean, ignored);
    expect(actual.size).toBe(expected.size);
    expect([...actual.entries()].sort()).toEqual([...expected.entries()].sort());
  });
});
