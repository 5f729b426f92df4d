import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * Where runc puts a container's memory cgroup when the configuration names no cgroupsPath: a
 * child named after the container id of the memory cgroup runc itself runs in (ours). Knowing it
 * lets us read whether the kernel's OOM killer ended a container before `runc delete` removes it.
 */
export class MemoryCgroups {
  private constructor(
    private readonly dir: string,
    private readonly version: 1 | 2,
  ) {}

  /** This process's memory cgroup (v1 memory hierarchy, else v2), or null if it has none. */
  static async ofSelf(): Promise<MemoryCgroups | null> {
    const [cgroups, mounts] = await Promise.all([
      fs.readFile('/proc/self/cgroup', 'utf8').catch(() => ''),
      fs.readFile('/proc/self/mountinfo', 'utf8').catch(() => ''),
    ]);
    const mountsOf = mounts.split('\n').map((line) => {
      // mountinfo: id parent major:minor root mountpoint options … - fstype source superoptions
      const [left, right] = line.split(' - ');
      const fields = left?.split(' ') ?? [];
      const [fstype, , superOptions] = right?.split(' ') ?? [];
      return { root: fields[3], point: fields[4], fstype, superOptions: superOptions ?? '' };
    });
    for (const line of cgroups.split('\n')) {
      const [, controllers, rel] = line.split(/:(.*?):/);
      if (controllers === undefined || rel === undefined) continue;
      if (controllers.split(',').includes('memory')) {
        const mount = mountsOf.find(
          (m) => m.fstype === 'cgroup' && m.superOptions.split(',').includes('memory'),
        );
        if (mount?.point) return new MemoryCgroups(within(mount.point, mount.root, rel), 1);
      }
    }
    const v2 = cgroups.split('\n').find((l) => l.startsWith('0::'));
    const mount = mountsOf.find((m) => m.fstype === 'cgroup2');
    if (v2 && mount?.point) {
      const dir = within(mount.point, mount.root, v2.slice(3));
      const controllers = await fs
        .readFile(path.join(dir, 'cgroup.controllers'), 'utf8')
        .catch(() => '');
      if (controllers.split(/\s+/).includes('memory')) return new MemoryCgroups(dir, 2);
    }
    return null;
  }

  /** How many times the OOM killer ended a process of container `id` (0 when unknown). */
  async oomKills(id: string): Promise<number> {
    const file = this.version === 1 ? 'memory.oom_control' : 'memory.events';
    const text = await fs.readFile(path.join(this.dir, id, file), 'utf8').catch(() => '');
    const match = /^oom_kill (\d+)$/m.exec(text);
    return match ? Number(match[1]) : 0;
  }
}

/** A cgroup path as seen from /proc/self/cgroup, under a mount of (part of) the hierarchy. */
function within(mountPoint: string, mountRoot: string | undefined, rel: string): string {
  const root = mountRoot && mountRoot !== '/' ? mountRoot : '';
  const inside = root && rel.startsWith(root) ? rel.slice(root.length) : rel;
  return path.join(mountPoint, inside);
}
