import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { linkTreeInto, removeTreeFiles } from './tree-files';

/**
 * A walk over a large tree shares the service's one thread with every other tree's acquires, the
 * broker and the probes: it gives the thread back as it goes, not only once it has done.
 */
let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), 'tg-tree-files-'));
});
afterAll(() => rm(base, { recursive: true, force: true }));

/** How many turns of the event loop ran while `work` did (each turn: one `setImmediate`). */
async function turnsDuring(work: Promise<void>): Promise<number> {
  let done = false;
  const finished = work.finally(() => (done = true));
  let turns = 0;
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve));
    turns++;
  }
  await finished;
  return turns;
}

it('gives the event loop back while it mirrors a large tree and while it removes one', async () => {
  // 20 directories of 150 files: 3,020 entries, a dozen slices.
  const tree = path.join(base, 'tree');
  for (let d = 0; d < 20; d++) {
    const dir = path.join(tree, `d${d}`);
    await mkdir(dir, { recursive: true });
    await Promise.all(
      Array.from({ length: 150 }, (_, f) => writeFile(path.join(dir, `f${f}`), `${d}/${f}\n`)),
    );
  }
  const mirror = path.join(base, 'mirror');
  await mkdir(mirror);

  expect(await turnsDuring(linkTreeInto(tree, mirror, { maxEntries: 10_000 }))).toBeGreaterThan(5);
  expect((await readdir(mirror)).length).toBe(20);
  expect((await readdir(path.join(mirror, 'd19'))).length).toBe(150);

  expect(await turnsDuring(removeTreeFiles(mirror, path.join(base, 'spill')))).toBeGreaterThan(5);
  expect(await readdir(base)).not.toContain('mirror');
  // The source is untouched: a mirror's files are links to the same inodes, removed as links.
  expect((await readdir(path.join(tree, 'd0'))).length).toBe(150);
});

it('walks one tree at a time: walks side by side hold no more descriptors than one', async () => {
  // Each tree nested 200 deep: a walk holds a descriptor per level on its way down.
  const trees = [path.join(base, 'deep-a'), path.join(base, 'deep-b'), path.join(base, 'deep-c')];
  for (const tree of trees) {
    let at = tree;
    for (let i = 0; i < 200; i++) at = path.join(at, 'd');
    await mkdir(at, { recursive: true });
    await Promise.all(
      Array.from({ length: 300 }, (_, f) => writeFile(path.join(at, `f${f}`), 'x')),
    );
  }
  // Read on this thread, between the walks' turns: what is open while they pause.
  const open = () => readdirSync('/proc/self/fd').length;
  const before = open();
  let most = before;
  let done = false;
  const removals = Promise.all(trees.map((t) => removeTreeFiles(t, path.join(base, 'spill'))));
  const finished = removals.finally(() => (done = true));
  while (!done) {
    most = Math.max(most, open());
    await new Promise((resolve) => setImmediate(resolve));
  }
  await finished;
  for (const tree of trees) expect(await readdir(base)).not.toContain(path.basename(tree));
  // One walk's 200 levels, and a margin for the test's own reads: not three walks' 600.
  expect(most - before).toBeGreaterThan(150);
  expect(most - before).toBeLessThan(300);
});

it('ends a removal a call keeps refilling, and the walks after it run (red team)', async () => {
  const tree = path.join(base, 'refilled');
  const bottom = path.join(tree, 'd0', 'd1');
  await mkdir(bottom, { recursive: true });
  // Two writers two levels down, creating files (and their directory again) as fast as they can
  // for as long as the tree is there — as a call of the tree's agent still running may.
  const writers = [0, 1].map((k) =>
    spawn(process.execPath, [
      '-e',
      `const fs = require('fs');
      const [root, dir, k] = process.argv.slice(1);
      for (let i = 0; fs.existsSync(root); i++) {
        try { fs.closeSync(fs.openSync(dir + '/f' + k + '-' + i, 'w')); }
        catch { try { fs.mkdirSync(dir); } catch {} }
      }`,
      tree,
      bottom,
      String(k),
    ]),
  );
  try {
    // Both writing before the removal starts (a node process takes a while to start on a busy
    // machine; a removal before them would find nothing to race).
    const written = (k: number) => readdirSync(bottom).some((n) => n.startsWith(`f${k}-`));
    while (!written(0) || !written(1)) await new Promise((resolve) => setTimeout(resolve, 20));
    const removal = removeTreeFiles(tree, path.join(base, 'spill'));
    // Queued behind the removal (walks run one at a time).
    const small = path.join(base, 'small');
    await mkdir(path.join(small, 'a'), { recursive: true });
    await mkdir(path.join(base, 'small-mirror'));
    const after = linkTreeInto(small, path.join(base, 'small-mirror'), { maxEntries: 10 });
    // Before, the removal went on for as long as the writers did: here, for ever.
    const outcome = await removal.then(
      () => 'removed',
      (err: { code?: string }) => err.code,
    );
    if (outcome === 'removed')
      expect(existsSync(tree)).toBe(false); // it won the race outright
    else expect(outcome).toBe('conflict');
    await after;
    expect(await readdir(path.join(base, 'small-mirror'))).toEqual(['a']);
  } finally {
    for (const w of writers) w.kill('SIGKILL');
  }
});
