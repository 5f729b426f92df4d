import { promises as fs } from 'node:fs';
import path from 'node:path';
import { PidsCgroup } from './pids-cgroup';

/** The real pids cgroup hierarchy of this machine (cgroup v1, as on the CI machines). */
describe('PidsCgroup, on the machine’s pids cgroup', () => {
  it('gives every run its own cgroup when several executors share the process', async () => {
    const first = await PidsCgroup.open(undefined);
    const second = await PidsCgroup.open(undefined);
    expect(first).not.toBeNull();
    const made = await Promise.all([
      first!.create(4),
      second!.create(4),
      first!.create(4),
      second!.create(4),
    ]);
    try {
      expect(new Set(made).size).toBe(4);
      for (const dir of made)
        expect((await fs.readFile(path.join(dir, 'pids.max'), 'utf8')).trim()).toBe('4');
    } finally {
      await Promise.all(made.map((dir) => first!.remove(dir)));
    }
  });

  it('steps over a cgroup an earlier process with this pid left behind', async () => {
    const cgroup = (await PidsCgroup.open(undefined))!;
    const probe = await cgroup.create(1);
    await cgroup.remove(probe);
    // The next few names this process would take, already there (as after a pid is reused).
    const n = Number(path.basename(probe).split('-')[1]);
    const parent = path.dirname(probe);
    const leftovers = [1, 2].map((i) => path.join(parent, `${process.pid}-${n + i}`));
    for (const dir of leftovers) await fs.mkdir(dir);
    try {
      const dir = await cgroup.create(2);
      expect(leftovers).not.toContain(dir);
      expect((await fs.readFile(path.join(dir, 'pids.max'), 'utf8')).trim()).toBe('2');
      await cgroup.remove(dir);
    } finally {
      for (const dir of leftovers) await fs.rmdir(dir);
    }
  });
});
