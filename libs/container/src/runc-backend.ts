import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, ErrorCode, ToolgateError } from '@toolgate/contracts';
import type { FileHandle } from 'node:fs/promises';
import {
  CappedBuffer,
  EGRESS_ENV,
  findExecutable,
  openProtectedMounts,
  openScopeMounts,
  scopeMoved,
  resolveProtectedMounts,
} from '@toolgate/sandbox';
import {
  containerLimits,
  operatorLimits,
  type ContainerBackend,
  type ContainerLimits,
  type ContainerRequest,
  type ContainerResult,
} from './container-backend';
import { ImageStore } from './image-store';
import { MemoryCgroups } from './memory-cgroup';
import { INPUT_FILE, ociConfig, WORK_DIR } from './oci-config';
import { egressHook, RuncEgress } from './runc-egress';

const run = promisify(execFile);

/** The operator's configuration of the local backend. */
export interface RuncSettings {
  /** runc: a path, or a name looked up on PATH. Default `runc`. */
  runc?: string;
  /** The image directory: `<images>/<reference>/rootfs` (see {@link ImageStore}). */
  images: string;
  /**
   * runc's state directory (`runc --root`) and the bundles of running calls. Default
   * `/run/toolgate-runc`. Containers of this service only: stale ones are removed at open.
   */
  stateDir?: string;
  /** The most any container may have; a tool may lower a limit, never raise one. */
  limits?: Partial<ContainerLimits>;
  /** The user tools run as inside the container (no capabilities either way). Default root. */
  user?: { uid: number; gid: number };
}

/** How often a kill is repeated until runc has ended (a container still being created). */
const KILL_RETRY_MS = 100;

/** The exit status of {@link STAGE_SCRIPT} when a staged path is not the file that was checked. */
export const STAGE_REFUSED = 125;

/**
 * The protected mounts of a call, made race-free for runc: runc binds by path, and a concurrent
 * call of the same directory could swap a folder for a symlink between our check and runc's mount
 * (binding a host directory into the container, writable for a folder on the way to a protected
 * path). So runc runs in a private mount namespace of its own (`unshare --mount`, propagation
 * private: nothing reaches the host's), where this script first binds each checked path onto a
 * staging file in the call's bundle (ours, mode 0700) and checks the staged mount is the very
 * file of the descriptor opened and checked (fd 3, 4, …: device and inode), as bubblewrap does for
 * `--bind-fd`, closes the descriptors and becomes runc, which binds from the staging files.
 * Arguments: the count, then source and staging path pairs, then runc's argv. Fixed text.
 */
export const STAGE_SCRIPT =
  'n=$1; shift; i=0; ' +
  'while [ $i -lt $n ]; do fd=$((3+i)); ' +
  'mount --no-canonicalize --bind -- "$1" "$2" || exit 125; ' +
  '[ "$(stat -L -c %d:%i /proc/self/fd/$fd)" = "$(stat -c %d:%i -- "$2")" ] || exit 125; ' +
  'eval "exec $fd>&-"; shift 2; i=$((i+1)); done; ' +
  'exec "$@"';
const ID_PREFIX = 'tg-';

/**
 * The local container backend: one runc container per call, from an image directory on this
 * machine (see {@link ociConfig} for what the container is made of). The call's input goes to
 * the container's stdin and is bound at /toolgate/input.json; its stdout and stderr come back
 * capped. At the deadline or on cancel the container is killed before `run` resolves; whatever
 * the ending, it is then deleted (with its cgroups) and its bundle removed (see {@link idle}).
 */
export class RuncBackend implements ContainerBackend {
  readonly kind = 'runc' as const;
  private seq = 0;
  private readonly cleanups = new Set<Promise<void>>();

  private constructor(
    private readonly runc: string,
    /** `<stateDir>/runc`: runc's own state (`--root`), one directory per container. */
    private readonly runcRoot: string,
    /** `<stateDir>/bundles`: the bundle (config and input) of each running call. */
    private readonly bundles: string,
    private readonly images: ImageStore,
    /** The operator's maxima. */
    readonly limits: Readonly<ContainerLimits>,
    private readonly user: { uid: number; gid: number },
    private readonly memory: MemoryCgroups | null,
    private readonly unshare: string,
    private readonly bash: string,
    /** nsenter and this process's Node.js binary: a container's egress (see `runc-egress.ts`). */
    private readonly egressTools: { nsenter: string; node: string } | undefined,
  ) {}

  /**
   * Checks that runc is installed and can limit memory and processes here, and removes the
   * containers a crashed run of this service left behind. Refuses with a ConfigError naming the
   * Debian package otherwise.
   */
  static async open(settings: RuncSettings): Promise<RuncBackend> {
    const runc = await findExecutable(settings.runc ?? 'runc');
    if (!runc) {
      throw new ConfigError(
        `runc (${settings.runc ?? 'runc'}) is not installed: install the Debian package "runc" (apt-get install runc)`,
        { details: { package: 'runc' } },
      );
    }
    if (process.getuid?.() !== 0) {
      throw new ConfigError(
        'the runc container backend needs root (it creates namespaces and cgroups); run the executor as root, or use the Kubernetes backend',
      );
    }
    const images = await fs.realpath(settings.images).catch(() => undefined);
    if (!images || !(await fs.stat(images)).isDirectory()) {
      throw new ConfigError(`the container image directory ${settings.images} does not exist`, {
        details: { field: 'images' },
      });
    }
    const memory = await MemoryCgroups.ofSelf();
    if (!memory) {
      throw new ConfigError(
        'runc cannot limit memory here: this process has no memory cgroup (cgroup v1 memory hierarchy, or cgroup v2 with the memory controller)',
      );
    }
    const unshare = await findExecutable('unshare');
    const bash = await findExecutable('bash');
    if (!unshare || !bash || !(await findExecutable('mount'))) {
      throw new ConfigError(
        'the runc backend needs unshare and mount (Debian package "util-linux") and bash to keep protected paths in place',
        { details: { package: 'util-linux' } },
      );
    }
    // Only a container given egress needs it: without, such a call cannot start (`config`).
    const nsenter = await findExecutable('nsenter');
    const stateDir = path.resolve(settings.stateDir ?? '/run/toolgate-runc');
    for (const dir of ['runc', 'bundles']) {
      await fs.mkdir(path.join(stateDir, dir), { recursive: true, mode: 0o700 });
    }
    const backend = new RuncBackend(
      runc,
      path.join(stateDir, 'runc'),
      path.join(stateDir, 'bundles'),
      new ImageStore(images),
      operatorLimits(settings.limits),
      settings.user ?? { uid: 0, gid: 0 },
      memory,
      unshare,
      bash,
      nsenter ? { nsenter, node: await fs.realpath(process.execPath) } : undefined,
    );
    await backend.removeStale();
    return backend;
  }

  async run(request: ContainerRequest): Promise<ContainerResult> {
    const image = await this.images.resolve(request.image);
    const root = await workRoot(request.cwd);
    const handles: FileHandle[] = [];
    try {
      return await this.runIn(request, image, root, handles);
    } finally {
      await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    }
  }

  private async runIn(
    request: ContainerRequest,
    image: Awaited<ReturnType<ImageStore['resolve']>>,
    root: string,
    handles: FileHandle[],
  ): Promise<ContainerResult> {
    // Opened and checked here; staged for runc from these descriptors (see STAGE_SCRIPT).
    const mounts = await openProtectedMounts(
      root,
      await resolveProtectedMounts(root, request.protectedPaths),
      handles,
    );
    // The directory itself is staged the same way, last: runc binds /work by name, and another
    // call that can write its parent could swap it for a symlink between the check and the mount.
    await openScopeMounts([{ path: root, directory: true }], handles);
    const staged = [...mounts.protectedPaths, ...mounts.ancestorPaths, root];
    const limits = containerLimits(this.limits, request.limits);
    const id = `${ID_PREFIX}${process.pid}-${++this.seq}-${randomBytes(3).toString('hex')}`;
    const bundle = path.join(this.bundles, id);
    const inputDir = path.join(bundle, 'input');
    await fs.mkdir(inputDir, { recursive: true, mode: 0o700 });
    const stage = path.join(bundle, 'stage');
    await fs.mkdir(stage, { mode: 0o700 });
    const mountSources: Record<string, string> = {};
    const stages: { source: string; target: string }[] = [];
    let egress: RuncEgress | undefined;
    try {
      if (request.egress !== undefined) {
        if (request.network) {
          throw new ConfigError('a container has either the host network or egress, not both');
        }
        if (!this.egressTools) {
          throw new ConfigError(
            'a container with network needs nsenter (Debian package "util-linux") for its egress',
            { details: { package: 'util-linux' } },
          );
        }
        egress = await RuncEgress.open(bundle, request.egress, this.egressTools);
      }
      for (const [i, p] of staged.entries()) {
        const target = path.join(stage, String(i));
        if ((await handles[i]!.stat()).isDirectory()) await fs.mkdir(target);
        else await fs.writeFile(target, '');
        mountSources[p] = target;
        stages.push({ source: p, target });
      }
      await fs.writeFile(path.join(inputDir, 'input.json'), request.input, { mode: 0o444 });
      const config = ociConfig({
        rootfs: image.rootfs,
        argv: request.argv,
        env: {
          PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          ...image.env,
          HOME: '/tmp',
          TMPDIR: '/tmp',
          ...request.env,
          ...(egress ? EGRESS_ENV : {}),
          TOOLGATE_INPUT_FILE: INPUT_FILE,
        },
        workDir: root,
        workWritable: request.writable,
        protectedPaths: mounts.protectedPaths,
        ancestorPaths: mounts.ancestorPaths,
        mountSources,
        inputDir,
        network: request.network,
        ...(egress ? { egressHook: egressHook(this.egressTools!.node, egress.hookSocket) } : {}),
        memoryBytes: limits.memoryBytes,
        processes: limits.processes,
        cpus: limits.cpus,
        cpuSeconds: limits.cpuSeconds,
        tmpBytes: limits.tmpBytes,
        openFiles: limits.openFiles,
        user: this.user,
      });
      await fs.writeFile(path.join(bundle, 'config.json'), JSON.stringify(config));
      const log = path.join(bundle, 'runc.log');
      const result = await this.runContainer(id, bundle, log, request, stages, handles);
      if (result.exitCode === STAGE_REFUSED && !(await fs.stat(log).catch(() => undefined))) {
        throw new ToolgateError(
          ErrorCode.Config,
          'the working directory, or a protected path in it, changed while the container was set up: the container is not started',
        );
      }
      const oomKills = await this.memory?.oomKills(id);
      const startError = result.exitCode === 0 ? undefined : await runFailure(log);
      return {
        ...result,
        memoryExceeded: (oomKills ?? 0) > 0,
        ...(startError ? { startError } : {}),
      };
    } finally {
      await egress?.close();
      // The container has stopped (its init exited, and with it every process of its PID
      // namespace): what is left is runc's state, empty cgroups and the bundle. They are removed
      // right after the result is handed back rather than before — a delete is another runc
      // process, a tenth of a call — and `idle()` waits for them; a crash in between leaves them
      // to the next open's sweep.
      const cleanup = this.delete(id)
        .then(() => fs.rm(bundle, { recursive: true, force: true }))
        .catch(() => undefined)
        .finally(() => this.cleanups.delete(cleanup));
      this.cleanups.add(cleanup);
    }
  }

  /** Resolves once every finished container has been deleted and its bundle removed. */
  async idle(): Promise<void> {
    while (this.cleanups.size) await Promise.all([...this.cleanups]);
  }

  /**
   * `runc run` in the foreground: the container's stdio are our pipes, and runc exits with the
   * container's init. `--keep` leaves the stopped container (and its cgroups, for the OOM count)
   * until {@link delete}.
   */
  private runContainer(
    id: string,
    bundle: string,
    log: string,
    request: ContainerRequest,
    stages: readonly { source: string; target: string }[] = [],
    handles: readonly FileHandle[] = [],
  ): Promise<Omit<ContainerResult, 'memoryExceeded'>> {
    const stdout = new CappedBuffer(request.maxOutputBytes);
    const stderr = new CappedBuffer(request.maxOutputBytes);
    if (request.signal?.aborted) {
      return Promise.resolve({ ending: 'cancelled', exitCode: null, signal: null, stdout, stderr });
    }
    return new Promise((resolve, reject) => {
      const runcArgv = [
        this.runc,
        // runc's own messages go to its log, so stderr is the tool's alone.
        ...[
          '--root',
          this.runcRoot,
          '--log',
          log,
          '--log-format',
          'json',
          'run',
          '--keep',
          '--bundle',
          bundle,
          id,
        ],
      ];
      const [program, ...args] = stages.length
        ? [
            this.unshare,
            '--mount',
            '--propagation',
            'private',
            '--',
            this.bash,
            '--norc',
            '--noprofile',
            '-c',
            STAGE_SCRIPT,
            'stage',
            String(stages.length),
            ...stages.flatMap((s) => [s.source, s.target]),
            ...runcArgv,
          ]
        : runcArgv;
      const child = spawn(program!, args, {
        cwd: bundle,
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
        // Not detached: runc in a session of its own takes a quarter longer to run a container,
        // and nothing here needs a process-group kill (`runc kill` reaches the container, whose
        // init takes everything in its PID namespace with it).
        stdio: ['pipe', 'pipe', 'pipe', ...handles.map((h) => h.fd)],
      });
      let ending: ContainerResult['ending'] = 'exited';
      let killer: NodeJS.Timeout | undefined;
      const stop = (why: ContainerResult['ending']) => {
        if (ending !== 'exited') return;
        ending = why;
        // The container may still be being created, when `runc kill` cannot find it yet:
        // repeat until runc has ended.
        const kill = () => void this.kill(id);
        kill();
        killer = setInterval(kill, KILL_RETRY_MS);
      };
      const timer = setTimeout(() => stop('timeout'), request.timeoutMs);
      const onAbort = () => stop('cancelled');
      request.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        clearInterval(killer);
        request.signal?.removeEventListener('abort', onAbort);
      };
      child.stdout!.on('data', (b: Buffer) => stdout.push(b));
      child.stderr!.on('data', (b: Buffer) => stderr.push(b));
      // A tool that exits without reading its input closes the pipe: EPIPE is not a failure.
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(request.input);
      child.once('error', (err) => {
        done();
        reject(
          new ToolgateError(
            ErrorCode.Unavailable,
            `runc could not start: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
          ),
        );
      });
      child.once('close', (exitCode, signal) => {
        done();
        resolve({ ending, exitCode, signal, stdout, stderr });
      });
    });
  }

  private async kill(id: string): Promise<void> {
    await run(this.runc, ['--root', this.runcRoot, 'kill', '--all', id, 'KILL']).catch(
      () => undefined,
    );
  }

  /** Deletes the container, killing whatever is left of it; a missing one is fine. */
  private async delete(id: string): Promise<void> {
    await run(this.runc, ['--root', this.runcRoot, 'delete', '--force', id]).catch(() => undefined);
  }

  /**
   * Containers of this service whose process is gone (a crash, a kill -9): they would hold their
   * cgroups and mounts forever. A container of a live replica sharing the state directory is
   * left alone.
   */
  private async removeStale(): Promise<void> {
    const { stdout } = await run(this.runc, ['--root', this.runcRoot, 'list', '--quiet']).catch(
      () => ({ stdout: '' }),
    );
    const bundles = await fs.readdir(this.bundles).catch(() => []);
    const ids = new Set([...stdout.split('\n'), ...bundles].filter((s) => s.startsWith(ID_PREFIX)));
    for (const id of ids) {
      const owner = Number(/^tg-(\d+)-/.exec(id)?.[1]);
      if (owner === process.pid || alive(owner)) continue;
      await this.delete(id);
      await fs.rm(path.join(this.bundles, id), { recursive: true, force: true });
    }
  }
}

/**
 * Why runc could not start the container's command, from its JSON log (`runc run failed: …`),
 * or undefined when the command itself ran (and its exit status is the tool's).
 */
async function runFailure(log: string): Promise<string | undefined> {
  const text = await fs.readFile(log, 'utf8').catch(() => '');
  for (const line of text.split('\n').reverse()) {
    let entry: { level?: unknown; msg?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.level === 'error' && typeof entry.msg === 'string') {
      return entry.msg.replace(/^runc run failed: /, '').slice(0, 1000);
    }
  }
  return undefined;
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The call's directory, which must be a real path (as the sandbox's: a directory that is, or goes
 * through, a symlink now was swapped by another call that can write its parent, and is refused,
 * never followed); the whole root file system refuses the call.
 */
async function workRoot(cwd: string): Promise<string> {
  const asked = path.resolve(cwd);
  const root = await fs.realpath(asked).catch((err: NodeJS.ErrnoException) => {
    throw new ToolgateError(
      ErrorCode.ToolFailed,
      `the working directory cannot be used: ${err.code ?? 'error'}`,
    );
  });
  if (root === '/') {
    throw new ConfigError(`a container cannot have the whole root file system as ${WORK_DIR}`);
  }
  if (root !== asked) throw scopeMoved(path.basename(asked));
  return root;
}
