import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '@toolgate/contracts';
import { killQuietly } from './process-runner';

/** The directory, under the cgroup we start from (pids or memory), that holds one cgroup per running sandbox. */
const PARENT = 'toolgate-sandbox';

/**
 * The number of this process's next run cgroup: one sequence for the process, since several
 * executors may share it (the bench's and tests' stacks) and each names its runs' cgroups
 * `<pid>-<n>` in the same parent.
 */
let nextRun = 0;

/**
 * One pids cgroup per sandboxed run, so a process limit holds where RLIMIT_NPROC does not: the
 * kernel never applies RLIMIT_NPROC to root. The run's first process (the launcher, which then
 * `exec`s bubblewrap) moves itself into the cgroup before anything else starts, so every process
 * of the run is counted from the first fork on.
 */
export class PidsCgroup {
  protected constructor(protected readonly parent: string) {}

  /**
   * Prepares `<root>/toolgate-sandbox`. `root` names a pids cgroup directory (cgroup v1 pids
   * hierarchy, or a cgroup v2 directory whose `cgroup.subtree_control` has `pids`); without it the
   * cgroup v1 pids hierarchy of this process is used when there is one. Returns null when no
   * usable cgroup is found; an explicit `root` that does not work is a ConfigError.
   */
  static async open(root: string | undefined): Promise<PidsCgroup | null> {
    return openUnder(root, 'pids', (parent) => new PidsCgroup(parent));
  }

  /** A new cgroup allowing at most `max` processes; remove it with {@link remove}. */
  async create(max: number): Promise<string> {
    return this.createWith('pids.max', String(Math.max(1, Math.floor(max))));
  }

  /** A new run cgroup with `value` written to its `file`. */
  protected async createWith(file: string, value: string): Promise<string> {
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
      await fs.writeFile(path.join(dir, file), value);
    } catch (err) {
      await fs.rmdir(dir).catch(() => undefined);
      throw err;
    }
    return dir;
  }

  /** Removes stale cgroups, then makes and removes one, so a cgroup that cannot work fails now. */
  async selfTest(): Promise<void> {
    await this.removeStale();
    const probe = await this.probe();
    await this.remove(probe);
  }

  protected probe(): Promise<string> {
    return this.create(1);
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
  protected async removeStale(): Promise<void> {
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

/**
 * One memory cgroup per sandboxed run: a single memory limit for the run's whole process tree,
 * whatever number of processes it forks (RLIMIT_AS binds each process alone, so six children of a
 * 64 MiB tool held six times that). Pages the run writes to its private `/tmp` and `/dev/shm`
 * count as well, so the limit bounds what the run holds in the host's memory, all told. Swap is
 * limited to the same figure where the kernel accounts it (`memory.memsw.limit_in_bytes`). At the
 * limit the kernel's OOM killer ends a process of the run, never one outside it. The launcher
 * moves the run's first process into it, as into the pids cgroup.
 */
export class MemoryCgroup extends PidsCgroup {
  /**
   * Prepares `<root>/toolgate-sandbox` in a memory cgroup directory (cgroup v1 memory hierarchy,
   * or cgroup v2 with `memory` in `cgroup.subtree_control`); without `root`, the memory hierarchy
   * of this process. Null when there is none; an explicit `root` that does not work is a
   * ConfigError.
   */
  static override async open(root: string | undefined): Promise<MemoryCgroup | null> {
    return openUnder(root, 'memory', (parent) => new MemoryCgroup(parent));
  }

  /**
   * The hierarchy's shape, looked up once (every cgroup of it has the same files): cgroup v1 (with
   * or without swap accounting) or v2.
   */
  private shape?: Promise<{ v1: boolean; memsw: boolean }>;

  /** A new cgroup whose processes hold at most `bytes` together; remove it with {@link remove}. */
  override async create(bytes: number): Promise<string> {
    const limit = String(Math.max(4 * 1024 * 1024, Math.floor(bytes)));
    this.shape ??= Promise.all([
      exists(path.join(this.parent, 'memory.limit_in_bytes')),
      exists(path.join(this.parent, 'memory.memsw.limit_in_bytes')),
    ]).then(([v1, memsw]) => ({ v1, memsw }));
    const { v1, memsw } = await this.shape;
    const dir = await this.createWith(v1 ? 'memory.limit_in_bytes' : 'memory.max', limit);
    try {
      if (v1) {
        // Present only with swap accounting; at or above the memory limit, so set after it.
        if (memsw) await fs.writeFile(path.join(dir, 'memory.memsw.limit_in_bytes'), limit);
      } else {
        await fs.writeFile(path.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
      }
    } catch (err) {
      await fs.rmdir(dir).catch(() => undefined);
      throw err;
    }
    return dir;
  }

  /** How many times the OOM killer ended a process of the run's cgroup (0 when unknown). */
  async oomKills(dir: string): Promise<number> {
    for (const file of ['memory.oom_control', 'memory.events']) {
      const text = await fs.readFile(path.join(dir, file), 'utf8').catch(() => '');
      const match = /^oom_kill (\d+)$/m.exec(text);
      if (match) return Number(match[1]);
    }
    return 0;
  }

  protected override probe(): Promise<string> {
    return this.create(0);
  }
}

/**
 * Prepares `<root>/toolgate-sandbox` for a controller and checks a cgroup can be made there.
 * `controller` names the v1 hierarchy (`/sys/fs/cgroup/<controller>`) looked up from this
 * process's cgroups when `root` is not given, and the v2 controller to enable below the parent.
 */
async function openUnder<T extends PidsCgroup>(
  root: string | undefined,
  controller: 'pids' | 'memory',
  make: (parent: string) => T,
): Promise<T | null> {
  const base = root ?? (await v1CgroupOfSelf(controller));
  if (base === undefined) return null;
  try {
    // Only ever inside a cgroup file system: never create directories anywhere else.
    await fs.access(path.join(base, 'cgroup.procs'));
    const parent = path.join(base, PARENT);
    await fs.mkdir(parent, { recursive: true });
    // cgroup v2: the children of our parent need the controller enabled in it.
    await fs.writeFile(path.join(parent, 'cgroup.subtree_control'), `+${controller}`).catch(() => {
      // cgroup v1 has no subtree_control: every cgroup of the hierarchy has the controller.
    });
    const cgroup = make(parent);
    await cgroup.selfTest();
    return cgroup;
  } catch (err) {
    if (root === undefined) return null;
    throw new ConfigError(
      `the ${controller} cgroup ${root} cannot hold sandboxes: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      { details: { field: `${controller}Cgroup` } },
    );
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/** `/sys/fs/cgroup/<controller>/<our path>` when this process is in that cgroup v1 hierarchy. */
async function v1CgroupOfSelf(controller: string): Promise<string | undefined> {
  const own = await fs.readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  for (const line of own.split('\n')) {
    const [, controllers, cgroupPath] = line.split(':');
    if (cgroupPath === undefined || !controllers?.split(',').includes(controller)) continue;
    const dir = path.join('/sys/fs/cgroup', controller, cgroupPath);
    return (await exists(path.join(dir, 'cgroup.procs'))) ? dir : undefined;
  }
  return undefined;
}
