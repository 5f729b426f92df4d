import { randomBytes } from 'node:crypto';
import { openSync, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import os from 'node:os';
import { ConfigError, ErrorCode, ToolgateError } from '@toolgate/contracts';
import path from 'node:path';
import {
  bwrapArgv,
  PROTECTED_FD_BASE,
  SANDBOX_TMP,
  scopeOrder,
  type HostLayout,
  type SandboxPlan,
} from './bwrap-argv';
import { BRIDGE_MEMORY_BYTES, BRIDGE_TASKS, bridgeArgv, bridgeEnv } from './egress-bridge';
import { findExecutable, probeHostLayout } from './host-layout';
import { LAUNCHER_ENV, launcherArgv } from './launcher-argv';
import { SandboxedProcess, startLongLived } from './long-lived-process';
import { MemoryCgroup, PidsCgroup } from './pids-cgroup';
import {
  openProtectedMounts,
  openScopeMounts,
  resolveProtectedMounts,
  scopeMoved,
} from './protected-mounts';
import { runProcess, type ProcessRequest, type ProcessResult } from './process-runner';
import { setIdFilter } from './seccomp-filter';
import {
  DEFAULT_LIMITS,
  effectiveLimits,
  prlimitArgv,
  type ResourceLimits,
} from './resource-limits';

/** Paths inside a run's directory that are bound read-only when they exist. */
export const DEFAULT_PROTECTED_PATHS: readonly string[] = Object.freeze(['.git']);

/** The operator's sandbox configuration, fixed when the sandbox is opened. */
export interface SandboxSettings {
  /** bubblewrap: a path, or a name looked up on PATH. Default `bwrap`. */
  bwrap?: string;
  /** util-linux prlimit, as above. Default `prlimit`. */
  prlimit?: string;
  /**
   * Host paths every run sees read-only, besides the system directories (e.g. `/opt/tools`).
   * Operator configuration only: a tool's registration never names a host path to mount.
   */
  readOnlyPaths?: readonly string[];
  /** The most any run may have; a request may lower a limit, never raise one. */
  limits?: Partial<ResourceLimits>;
  /** Size of each run's private /tmp, in bytes. Default 64 MiB. */
  tmpBytes?: number;
  /** Size of each run's private /dev/shm, in bytes. Default: `tmpBytes`. */
  shmBytes?: number;
  /**
   * A pids cgroup directory to create each run's cgroup under (see {@link PidsCgroup}). Default:
   * this process's cgroup v1 pids hierarchy, when there is one and it is writable.
   */
  pidsCgroup?: string;
  /**
   * A memory cgroup directory to create each run's cgroup under (see {@link MemoryCgroup}), which
   * limits the run's whole tree to `limits.addressSpaceBytes`. Default: this process's cgroup v1
   * memory hierarchy, when there is one and it is writable; without one, RLIMIT_AS limits each
   * process instead.
   */
  memoryCgroup?: string;
}

/** One run in the sandbox. */
export interface SandboxRequest extends Pick<
  ProcessRequest,
  'stdin' | 'timeoutMs' | 'maxOutputBytes' | 'signal'
> {
  /** The command: `argv[0]` is looked up on `env.PATH` inside the sandbox. Never a shell string. */
  argv: readonly string[];
  /** The run's directory: the only host path it may write (see `writable`). */
  cwd: string;
  /** Whether `cwd` is writable. Default true; false under read-only isolation. */
  writable?: boolean;
  /**
   * More host paths to bind writable (the caller's write scopes outside `cwd`). Trusted caller
   * input only; a path that does not exist is skipped.
   */
  writablePaths?: readonly string[];
  /**
   * More host paths to bind read-only for this run (the caller's read scopes). Trusted caller
   * input only, as {@link SandboxSettings.readOnlyPaths}.
   */
  readOnlyPaths?: readonly string[];
  /**
   * Paths in `cwd` (absolute, or relative to it) bound read-only over it when they exist: the
   * protected paths, found by the caller's policy. Default {@link DEFAULT_PROTECTED_PATHS}. Paths
   * outside `cwd` are skipped (they are not in the sandbox at all). Every directory on the way
   * from `cwd` to one is bound onto itself, so none can be renamed or removed. A protected path
   * that is a symlink cannot be bound over: what it reaches inside `cwd` is bound read-only in its
   * place (what it reaches outside is not in the sandbox), and the link itself is the caller's to
   * check after the run.
   */
  protectedPaths?: readonly string[];
  /** Share the host's network. Default false: a network namespace with loopback only. */
  network?: boolean;
  /**
   * A Unix socket on the host (a path only the caller controls) to reach through
   * {@link EGRESS_PORT} on the run's own loopback: the run keeps a network namespace of its own,
   * a bridge in it forwards each connection to the socket, and the command's environment names
   * it as the proxy (`HTTP_PROXY`, …: see `egress-bridge.ts`). Not with `network`.
   */
  egress?: string;
  /**
   * The whole environment of the command (build it from an allowlist). HOME and TMPDIR, when
   * present, are replaced with the private /tmp: the host's home is not in the sandbox.
   */
  env: Readonly<Record<string, string>>;
  /** Lower limits for this run than the operator's. */
  limits?: Partial<ResourceLimits>;
}

/** A helper left running in the sandbox (see {@link Sandbox.spawn}): no deadline, no output cap. */
export type LongLivedRequest = Omit<
  SandboxRequest,
  'stdin' | 'timeoutMs' | 'maxOutputBytes' | 'signal'
>;

const DEFAULT_TMP_BYTES = 64 * 1024 * 1024;

/** What {@link Sandbox.run} and {@link Sandbox.spawn} start: the launcher and what to undo after. */
interface PreparedLaunch {
  readonly argv: string[];
  readonly passFds: number[];
  readonly cwd: string;
  /** Closes the protected descriptors and removes the run's cgroups. */
  readonly cleanup: () => Promise<void>;
  /** Kills every process in the run's pids cgroup. */
  readonly killAlso?: () => void;
  /** Whether the OOM killer acted in the run's memory cgroup. */
  readonly oomKilled: () => Promise<boolean>;
}

/**
 * Runs commands under bubblewrap with resource limits, a deadline that kills the whole process
 * tree, output caps and an environment of the caller's choosing. Open it once per service: opening
 * checks that bubblewrap and prlimit are installed and that a sandbox actually starts on this host,
 * and refuses with a ConfigError naming the Debian package otherwise — there is no fallback to
 * running on the host.
 */
export class Sandbox {
  private constructor(
    private readonly bash: string,
    private readonly bwrap: string,
    private readonly prlimit: string,
    private readonly layout: HostLayout,
    private readonly readOnlyPaths: readonly string[],
    /** The operator's maxima. */
    readonly limits: Readonly<ResourceLimits>,
    private readonly tmpBytes: number,
    private readonly pids: PidsCgroup | null,
    private readonly memory: MemoryCgroup | null,
    private readonly shmBytes: number,
    /**
     * The seccomp filter (see `seccomp-filter.ts`): the descriptor of an unlinked file each run
     * reopens, held for the process's life (a plain descriptor: a FileHandle would be closed, with
     * a warning, when a sandbox no longer used is collected); null: none.
     */
    private readonly seccomp: number | null,
    /** This process's Node.js binary (a real path): an egress bridge runs on it. */
    private readonly node: string,
    /**
     * Where the callers of this sandbox keep the Unix sockets of their egress proxies (see
     * `egress-bridge.ts`; a real path, made by whoever first needs it). No run binds it or a
     * directory above it (see {@link plan}): a run whose scope held it could reach another
     * call's proxy, and its network.
     */
    readonly egressRoot: string,
  ) {}

  static async open(settings: SandboxSettings = {}): Promise<Sandbox> {
    const bwrap = await findExecutable(settings.bwrap ?? 'bwrap');
    if (!bwrap) {
      throw new ConfigError(
        `bubblewrap (${settings.bwrap ?? 'bwrap'}) is not installed: install the Debian package "bubblewrap" (apt-get install bubblewrap), or opt out of the sandbox explicitly`,
        { details: { package: 'bubblewrap' } },
      );
    }
    const prlimit = await findExecutable(settings.prlimit ?? 'prlimit');
    if (!prlimit) {
      throw new ConfigError(
        `prlimit (${settings.prlimit ?? 'prlimit'}) is not installed: install the Debian package "util-linux"`,
        { details: { package: 'util-linux' } },
      );
    }
    const bash = await findExecutable('bash');
    if (!bash) {
      throw new ConfigError('bash is not installed: install the Debian package "bash"', {
        details: { package: 'bash' },
      });
    }
    const readOnlyPaths: string[] = [];
    for (const p of settings.readOnlyPaths ?? []) {
      const real = await fs.realpath(p).catch(() => {
        throw new ConfigError(`sandbox read-only path ${p} does not exist`, {
          details: { field: 'readOnlyPaths' },
        });
      });
      if (real === '/') {
        throw new ConfigError('the sandbox cannot bind the whole root file system', {
          details: { field: 'readOnlyPaths' },
        });
      }
      readOnlyPaths.push(real);
    }
    const limits = effectiveLimits(
      { ...DEFAULT_LIMITS, ...definedOnly(settings.limits) },
      undefined,
    );
    const pids = await PidsCgroup.open(settings.pidsCgroup);
    if (!pids && process.getuid?.() === 0) {
      throw new ConfigError(
        'the sandbox cannot limit processes: the kernel does not apply RLIMIT_NPROC to root, and no writable pids cgroup was found. Run the executor as a non-root user, or name a pids cgroup directory it may create cgroups in',
        { details: { field: 'pidsCgroup' } },
      );
    }
    const memory = await MemoryCgroup.open(settings.memoryCgroup);
    const tmpBytes = settings.tmpBytes ?? DEFAULT_TMP_BYTES;
    const sandbox = new Sandbox(
      bash,
      bwrap,
      prlimit,
      await probeHostLayout(),
      readOnlyPaths,
      limits,
      tmpBytes,
      pids,
      memory,
      settings.shmBytes ?? tmpBytes,
      await openSeccompFilter(),
      await fs.realpath(process.execPath),
      path.join(
        await fs.realpath(os.tmpdir()),
        `toolgate-egress-${process.pid}-${randomBytes(4).toString('hex')}`,
      ),
    );
    await sandbox.selfTest();
    return sandbox;
  }

  /**
   * Removes {@link egressRoot} and whatever calls left in it: for the executor's stop, once its
   * calls have drained (each call's proxy removes its own directory as it ends).
   */
  async close(): Promise<void> {
    await fs.rm(this.egressRoot, { recursive: true, force: true });
  }

  /** Runs `request.argv` in the sandbox; resolves for every ending (see {@link runProcess}). */
  async run(request: SandboxRequest): Promise<ProcessResult> {
    const launch = await this.prepare(request);
    try {
      const result = await runProcess({
        argv: launch.argv,
        passFds: launch.passFds,
        cwd: launch.cwd,
        env: LAUNCHER_ENV,
        ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
        timeoutMs: request.timeoutMs,
        maxOutputBytes: request.maxOutputBytes,
        ...(request.signal ? { signal: request.signal } : {}),
        ...(launch.killAlso ? { killAlso: launch.killAlso } : {}),
      });
      if (await launch.oomKilled()) result.memoryExceeded = true;
      return result;
    } finally {
      await launch.cleanup();
    }
  }

  /**
   * Starts `request.argv` in the sandbox, as {@link run} does, and leaves it running with its stdio
   * piped: a long-lived helper answering requests for many calls of one scope. The caller bounds
   * what it reads and kills it ({@link SandboxedProcess.kill}); it also dies with this process.
   */
  async spawn(request: LongLivedRequest): Promise<SandboxedProcess> {
    const launch = await this.prepare(request);
    try {
      return await startLongLived({
        argv: launch.argv,
        passFds: launch.passFds,
        cwd: launch.cwd,
        env: LAUNCHER_ENV,
        cleanup: launch.cleanup,
        ...(launch.killAlso ? { killAlso: launch.killAlso } : {}),
      });
    } catch (err) {
      await launch.cleanup();
      throw err;
    }
  }

  /**
   * Everything a run and a long-lived helper share: the plan, the protected mounts opened from
   * checked descriptors, the run's pids and memory cgroups and the launcher's command line.
   * `cleanup` closes the descriptors and removes the cgroups (and so every process left in them).
   */
  private async prepare(request: LongLivedRequest): Promise<PreparedLaunch> {
    const planned = await this.plan(request);
    const limits = effectiveLimits(this.limits, request.limits);
    const handles: FileHandle[] = [];
    let cgroup: string | undefined;
    let memoryCgroup: string | undefined;
    const cleanup = async () => {
      await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
      // Awaited: once the cgroup is gone, so is every process of the run.
      if (cgroup) await this.pids!.remove(cgroup);
      if (memoryCgroup) await this.memory!.remove(memoryCgroup);
    };
    try {
      const protectedMounts = await openProtectedMounts(planned.cwd, planned, handles);
      const scopeFdBase = PROTECTED_FD_BASE + handles.length;
      await openScopeMounts(
        scopeOrder(planned).map(({ path: p }) => ({ path: p, directory: p === planned.cwd })),
        handles,
      );
      let seccompFd: number | undefined;
      if (this.seccomp !== null) {
        // A description of its own, read from the start: bubblewrap reads the filter to its end.
        handles.push(await fs.open(`/proc/self/fd/${this.seccomp}`, 'r'));
        seccompFd = PROTECTED_FD_BASE + handles.length - 1;
      }
      const plan: SandboxPlan = {
        ...planned,
        ...protectedMounts,
        scopeFdBase,
        ...(seccompFd !== undefined ? { seccompFd } : {}),
      };
      // RLIMIT_NPROC counts bubblewrap's init in the namespace too (and an egress bridge's
      // threads); the cgroup also counts the bubblewrap outside it.
      const bridge = plan.egress ? BRIDGE_TASKS : 0;
      cgroup = this.pids ? await this.pids.create(limits.processes + 2 + bridge) : undefined;
      memoryCgroup = this.memory
        ? await this.memory.create(
            limits.addressSpaceBytes + (plan.egress ? BRIDGE_MEMORY_BYTES : 0),
          )
        : undefined;
      const env = sandboxEnv(request.env);
      const argv = launcherArgv(
        this.bash,
        [cgroup, memoryCgroup].filter((c): c is string => c !== undefined),
        [
          ...bwrapArgv(this.bwrap, this.layout, plan, plan.egress ? bridgeEnv(env) : env),
          ...(plan.egress ? bridgeArgv(plan.egress.node) : []),
          ...prlimitArgv(
            this.prlimit,
            { ...limits, processes: limits.processes + 1 + bridge },
            { addressSpace: memoryCgroup === undefined },
          ),
          ...request.argv,
        ],
        PROTECTED_FD_BASE - 1 + handles.length,
      );
      const pids = cgroup;
      const memory = memoryCgroup;
      return {
        argv,
        passFds: handles.map((h) => h.fd),
        cwd: plan.cwd,
        cleanup,
        ...(pids ? { killAlso: () => this.pids!.killAll(pids) } : {}),
        oomKilled: async () => memory !== undefined && (await this.memory!.oomKills(memory)) > 0,
      };
    } catch (err) {
      await cleanup();
      throw err;
    }
  }

  /**
   * The mounts of one run: real paths, checked. The directory and every read and write path are
   * taken as real paths (resolve symlinks in configuration once, when the service starts), and
   * never followed through a symlink that is there now — a tool that can write a scope's parent
   * could have swapped the scope for a link to the host's keys: such a read or write path is not
   * bound at all (the link stays a link to nothing the run can see), as one that does not exist,
   * and such a directory refuses the run (`denied`). A `cwd` that is `/` refuses the run; nothing
   * an earlier run left inside the directory does (a symlink named like a protected path included).
   */
  async plan(request: LongLivedRequest): Promise<SandboxPlan> {
    const asked = path.resolve(request.cwd);
    const cwd = await fs.realpath(asked).catch((err: NodeJS.ErrnoException) => {
      throw new ToolgateError(
        ErrorCode.ToolFailed,
        `the working directory cannot be used: ${err.code ?? 'error'}`,
      );
    });
    if (cwd === '/') {
      throw new ConfigError('the sandbox cannot make the whole root file system writable');
    }
    if (cwd !== asked) throw scopeMoved(path.basename(asked));
    const readOnlyPaths: string[] = [];
    for (const p of [...this.readOnlyPaths, ...(request.readOnlyPaths ?? [])]) {
      const real = await realScope(p);
      if (real === '/') throw new ConfigError('the sandbox cannot bind the whole root file system');
      if (real !== undefined) readOnlyPaths.push(real);
    }
    const writablePaths: string[] = [];
    for (const p of request.writablePaths ?? []) {
      const real = await realScope(p);
      if (real === '/')
        throw new ConfigError('the sandbox cannot make the whole root file system writable');
      if (real !== undefined) writablePaths.push(real);
    }
    const mounts = await resolveProtectedMounts(
      cwd,
      request.protectedPaths ?? DEFAULT_PROTECTED_PATHS,
    );
    for (const scope of [cwd, ...readOnlyPaths, ...writablePaths]) {
      if (this.egressRoot === scope || this.egressRoot.startsWith(`${scope}/`)) {
        throw new ConfigError(
          "a sandboxed run cannot bind a directory that holds the executor's own sockets (its temporary directory, or one above it): give it a directory of its own",
        );
      }
    }
    if (request.egress !== undefined && request.network) {
      throw new ConfigError('a sandboxed run has either the host network or egress, not both');
    }
    return {
      cwd,
      cwdWritable: request.writable ?? true,
      readOnlyPaths,
      ...(writablePaths.length > 0 ? { writablePaths } : {}),
      ...mounts,
      network: request.network ?? false,
      ...(request.egress !== undefined
        ? { egress: { socket: request.egress, node: this.node } }
        : {}),
      tmpBytes: this.tmpBytes,
      shmBytes: this.shmBytes,
    };
  }

  /** Starts one sandbox for real: bubblewrap that cannot set up its namespaces fails here. */
  private async selfTest(): Promise<void> {
    let result: ProcessResult;
    const cwd = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-selftest-'));
    try {
      result = await this.run({
        argv: ['true'],
        cwd,
        env: { PATH: '/usr/bin:/bin' },
        timeoutMs: 10_000,
        maxOutputBytes: 4096,
      });
    } catch (err) {
      throw new ConfigError(`the sandbox does not start: ${(err as Error).message}`);
    } finally {
      await fs.rm(cwd, { recursive: true, force: true });
    }
    if (result.exitCode !== 0) {
      throw new ConfigError(
        `the sandbox does not start on this host (${result.ending}, exit ${result.exitCode ?? result.signal}): ${result.stderr.text().trim().slice(0, 500)}. bubblewrap needs unprivileged user namespaces (a container's seccomp profile may block them)`,
      );
    }
  }
}

/**
 * A read or write path of a run as the real path to bind; undefined — nothing to bind — when it
 * does not exist, or when it is, or goes through, a symlink (see {@link Sandbox.plan}).
 */
async function realScope(p: string): Promise<string | undefined> {
  const asked = path.resolve(p);
  const real = await fs.realpath(asked).catch(() => undefined);
  return real === asked || real === '/' ? real : undefined;
}

/**
 * The seccomp filter of this machine's architecture as an open, unlinked file (nothing can reach
 * it by name, nothing can change it), or null on an architecture the filter does not know.
 */
async function openSeccompFilter(): Promise<number | null> {
  const filter = setIdFilter();
  if (!filter) return null;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-seccomp-'));
  const file = path.join(dir, 'filter.bpf');
  try {
    await fs.writeFile(file, filter, { mode: 0o400 });
    return openSync(file, 'r');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

function sandboxEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...env };
  if ('HOME' in out) out.HOME = SANDBOX_TMP;
  if ('TMPDIR' in out) out.TMPDIR = SANDBOX_TMP;
  return out;
}

function definedOnly<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(
    Object.entries(o ?? {}).filter(([, v]) => v !== undefined),
  ) as Partial<T>;
}
