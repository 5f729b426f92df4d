import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '@toolgate/contracts';
import { killQuietly } from './process-runner';

/** The directory, under the pids cgroup we start from, that holds one cgroup per running sandbox. */
const PARENT = 'toolgate-sandbox';

/**
 * One pids cgroup per sandboxed run, so a process limit holds where RLIMIT_NPROC does not: the
 * kernel never applies RLIMIT_NPROC to root. The run's first process (the launcher, which then
 * `exec`s bubblewrap) moves itself into the cgroup before anything else starts, so every process
 * of the run is counted from the first fork on.
 */
/**
 * The number of this process's next run cgroup: one sequence for the process, since several
 * executors may share it (the bench's and tests' stacks) and each names its runs' cgroups
 * `<pid>-<n>` in the same parent.
 */
let nextRun = 0;

export class PidsCgroup {
  private constructor(private readonly parent: string) {}

  /**
   * Prepares `<root>/toolgate-sandbox`. `root` names a pids cgroup directory (cgroup v1 pids
   * hierarchy, or a cgroup v2 directory whose `cgroup.subtree_control` has `pids`); without it the
   * cgroup v1 pids hierarchy of this process is used when there is one. Returns null when no
   * usable cgroup is found; an explicit `root` that does not work is a ConfigError.
   */
  static async open(root: string | undefined): Promise<PidsCgroup | null> {
    const base = root ?? (await v1PidsCgroupOfSelf());
    if (base === undefined) return null;
    try {
      // Only ever inside a cgroup file system: never create directories anywhere else.
      await fs.access(path.join(base, 'cgroup.procs'));
      const parent = path.join(base, PARENT);
      await fs.mkdir(parent, { recursive: true });
      // cgroup v2: the children of our parent need the pids controller enabled in it.
      await fs.writeFile(path.join(parent, 'cgroup.subtree_control'), '+pids').catch(() => {
        // cgroup v1 has no subtree_control: every cgroup of the pids hierarchy has pids.max.
      });
      const cgroup = new PidsCgroup(parent);
      await cgroup.removeStale();
      const probe = await cgroup.create(1);
      await cgroup.remove(probe);
      return cgroup;
    } catch (err) {
      if (root === undefined) return null;
      throw new ConfigError(
        `the pids cgroup ${root} cannot hold sandboxes: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        { details: { field: 'pidsCgroup' } },
      );
    }
  }

  /** A new cgroup allowing at most `max` processes; remove it with {@link remove}. */
  async create(max: number): Promise<string> {
    let dir: string;
    for (;;) {
      dir = path.join(this.parent, `${process.pid}-${++nextRun}`);
      try {
        await fs.mkdir(dir);
        break;
      } catch (err) {
        // Left by an earlier process that had this pid (alive again, so not removed as stale).
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    try {
      await fs.writeFile(path.join(dir, 'pids.max'), String(Math.max(1, Math.floor(max))));
    } catch (err) {
      await fs.rmdir(dir).catch(() => undefined);
      throw err;
    }
    return dir;
  }

  /**
   * SIGKILLs every process in a run's cgroup, whatever its parent or session (synchronous: it runs
   * in the same turn as the kill of the run's process group).
   */
  killAll(dir: string): void {
    let procs: string;
    try {
      procs = readFileSync(path.join(dir, 'cgroup.procs'), 'utf8');
    } catch {
      return; // removed already
    }
    for (const line of procs.split('\n')) if (line) killQuietly(Number(line));
  }

  /**
   * Removes a run's cgroup once its processes are gone. The PID namespace is torn down when
   * bubblewrap's init dies, a moment after the run's pipes close, so a busy cgroup is retried.
   */
  async remove(dir: string): Promise<void> {
    // The kernel releases exited tasks from a cgroup a moment after they are reaped: retry
    // quickly first (most runs need one short retry at most), backing off to 50 ms, ~2 s in all.
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        await fs.rmdir(dir);
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        if (code !== 'EBUSY') throw err;
        await new Promise((resolve) => setTimeout(resolve, Math.min(50, 2 ** attempt)));
      }
    }
  }

  /** Cgroups an executor that is no longer running left behind (named `<its pid>-<n>`). */
  private async removeStale(): Promise<void> {
    for (const entry of await fs.readdir(this.parent, { withFileTypes: true })) {
      const owner = Number.parseInt(entry.name, 10);
      if (!entry.isDirectory() || !Number.isInteger(owner) || alive(owner)) continue;
      await fs.rmdir(path.join(this.parent, entry.name)).catch(() => undefined);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `/sys/fs/cgroup/pids/<our path>` when this process is in a cgroup v1 pids hierarchy. */
async function v1PidsCgroupOfSelf(): Promise<string | undefined> {
  const own = await fs.readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  for (const line of own.split('\n')) {
    const [, controllers, cgroupPath] = line.split(':');
    if (cgroupPath === undefined || !controllers?.split(',').includes('pids')) continue;
    const dir = path.join('/sys/fs/cgroup/pids', cgroupPath);
    const ok = await fs.access(path.join(dir, 'cgroup.procs')).then(
      () => true,
      () => false,
    );
    return ok ? dir : undefined;
  }
  return undefined;
}
