/**
 * The bubblewrap command line of one sandboxed run, built from a host layout (probed once) and a
 * mount plan (resolved per run). Pure: every path it receives is already absolute and real.
 */

import { EGRESS_SOCKET } from './egress-bridge';

/** A system path the sandbox reproduces from the host, read-only. */
export type HostEntry =
  /** A directory or file bound read-only at the same path. */
  | { kind: 'bind'; path: string }
  /** A symlink recreated as is (`/bin -> usr/bin` on merged-/usr systems). */
  | { kind: 'symlink'; path: string; target: string };

/** What of the host's system a sandbox sees: every entry read-only, nothing else. */
export interface HostLayout {
  readonly entries: readonly HostEntry[];
}

/** The mounts and namespaces of one run. */
export interface SandboxPlan {
  /** The working directory (real path). */
  readonly cwd: string;
  /** Whether `cwd` is bound writable: the only writable host path a sandbox ever has. */
  readonly cwdWritable: boolean;
  /** Further host paths bound read-only at the same path (real paths). */
  readonly readOnlyPaths: readonly string[];
  /** Further host paths bound writable at the same path (real paths): write scopes besides `cwd`. */
  readonly writablePaths?: readonly string[];
  /**
   * Existing paths inside `cwd` (real paths) bound read-only over the writable `cwd`: `.git` and
   * the other protected paths. A mount point cannot be written, renamed or removed. Each is bound
   * from a descriptor the caller opened and checked (`--ro-bind-fd`), the i-th at fd
   * {@link PROTECTED_FD_BASE} + i, so a path swapped for a symlink after the check binds nothing
   * else.
   */
  readonly protectedPaths: readonly string[];
  /**
   * The directories inside `cwd` on the way to a protected path (real paths), each bound onto
   * itself — writable when `cwd` is — from a checked descriptor, the j-th at fd
   * {@link PROTECTED_FD_BASE} + `protectedPaths.length` + j. A mount point cannot be renamed or
   * removed (EBUSY), so `mv .vscode x && mkdir .vscode` cannot carry a read-only bind away and put
   * a writable directory in its place: the protected path stays where the host has it.
   */
  readonly ancestorPaths?: readonly string[];
  /**
   * When set, `cwd`, the read-only and the writable paths are bound from descriptors the caller
   * opened and checked too (`--bind-fd`, `--ro-bind-fd`), the k-th of {@link scopeOrder} at fd
   * `scopeFdBase + k`: a scope swapped for a symlink between the check and the bind binds nothing
   * else. Without it they are bound by name.
   */
  readonly scopeFdBase?: number;
  /**
   * A descriptor holding the seccomp filter bubblewrap installs before the command runs
   * (`--seccomp`: see `seccomp-filter.ts`), read and closed by bubblewrap.
   */
  readonly seccompFd?: number;
  /**
   * Share the host's network namespace. Without it the sandbox has a network namespace of its own
   * with only a loopback interface: no route anywhere, the host's 127.0.0.1 included.
   */
  readonly network: boolean;
  /**
   * Egress through a proxy (see `egress-bridge.ts`): the Unix socket on the host, bound read-only
   * at {@link EGRESS_SOCKET}, and the Node.js binary the bridge runs on (real path), bound
   * read-only where the layout does not already hold it. The network namespace stays the run's own.
   */
  readonly egress?: { readonly socket: string; readonly node: string };
  /** Size of the private `/tmp` (a tmpfs of the sandbox's own), in bytes. */
  readonly tmpBytes: number;
  /** Size of the private `/dev/shm`, in bytes. Default: that of `/tmp`. */
  readonly shmBytes?: number;
}

/** The descriptor of the first protected path (after stdin, stdout and stderr). */
export const PROTECTED_FD_BASE = 3;

/** The private /tmp inside every sandbox; HOME and TMPDIR point at it. */
export const SANDBOX_TMP = '/tmp';

/**
 * `bwrap` arguments up to and including `--`; the command (prlimit and the tool's argv) follows.
 * `env` is the command's whole environment, set by bubblewrap inside the sandbox (`--clearenv`,
 * `--setenv`): the launcher and bubblewrap themselves run on the host with a fixed environment,
 * so no variable a tool chooses (`LD_PRELOAD`, `BASH_ENV`, …) acts outside the sandbox.
 *
 * - every namespace unshared (user, mount, pid, ipc, uts, cgroup, and net unless `network`), no
 *   nested user namespaces, all capabilities dropped, a new session (no TIOCSTI into a terminal);
 * - `--die-with-parent`: the sandbox dies with the process that started it;
 * - the new PID namespace has bubblewrap as its init: when the command exits or bubblewrap is
 *   killed, the kernel kills every process left in the namespace;
 * - a fresh `/proc` of that namespace (the host's processes, the service's environment among
 *   them, are not in it), a minimal `/dev`, a private `/tmp`; every writable tmpfs has a size —
 *   `/dev/shm` and `/tmp` the plan's — and `/dev` itself (a tmpfs of half the host's RAM, which
 *   bubblewrap cannot size) is remounted read-only once `/dev/shm` is on it: its device nodes
 *   still work, nothing can be stored there;
 * - binds in path order, so a deeper bind always lands on top of a shallower one (a protected
 *   path over the writable `cwd`, `cwd` over a read-only parent).
 */
export function bwrapArgv(
  bwrap: string,
  layout: HostLayout,
  plan: SandboxPlan,
  env: Readonly<Record<string, string>>,
): string[] {
  const args = [
    bwrap,
    '--unshare-all',
    // Explicit, unlike --unshare-all's "try": a host without user namespaces fails at start-up.
    '--unshare-user',
    '--disable-userns',
    ...(plan.network ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--hostname',
    'sandbox',
  ];
  for (const entry of layout.entries) {
    if (entry.kind === 'symlink') args.push('--symlink', entry.target, entry.path);
    else args.push('--ro-bind', entry.path, entry.path);
  }
  args.push(
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--perms',
    '1777',
    '--size',
    String(Math.max(4096, Math.floor(plan.shmBytes ?? plan.tmpBytes))),
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev',
    '--perms',
    '1777',
    '--size',
    String(Math.max(4096, Math.floor(plan.tmpBytes))),
    '--tmpfs',
    SANDBOX_TMP,
  );
  const scopeFd = (k: number) =>
    plan.scopeFdBase === undefined ? undefined : plan.scopeFdBase + k;
  const binds: { path: string; writable: boolean; order: number; fd?: number }[] = [
    ...scopeOrder(plan).map(({ path, writable, order }, k) => ({
      path,
      writable,
      order,
      ...(scopeFd(k) !== undefined ? { fd: scopeFd(k) } : {}),
    })),
    ...plan.protectedPaths.map((path, i) => ({
      path,
      writable: false,
      order: 2,
      fd: PROTECTED_FD_BASE + i,
    })),
    ...(plan.ancestorPaths ?? []).map((path, j) => ({
      path,
      writable: plan.cwdWritable,
      order: 2,
      fd: PROTECTED_FD_BASE + plan.protectedPaths.length + j,
    })),
  ];
  const seen = new Set<string>();
  binds
    .sort((a, b) => depth(a.path) - depth(b.path) || a.order - b.order)
    .forEach(({ path, writable, order, fd }) => {
      // The last bind of a path wins; a read-only path repeated as cwd keeps cwd's mode.
      const key = `${path}\0${writable}`;
      if (order < 2) {
        if (seen.has(key)) return;
        seen.add(key);
      }
      if (fd !== undefined) args.push(writable ? '--bind-fd' : '--ro-bind-fd', String(fd), path);
      else args.push(writable ? '--bind' : '--ro-bind', path, path);
    });
  if (plan.egress) {
    args.push('--ro-bind', plan.egress.socket, EGRESS_SOCKET);
    const { node } = plan.egress;
    const held = layout.entries.some(
      (e) => e.kind === 'bind' && (node === e.path || node.startsWith(`${e.path}/`)),
    );
    if (!held) args.push('--ro-bind', node, node);
  }
  if (plan.seccompFd !== undefined) args.push('--seccomp', String(plan.seccompFd));
  args.push('--clearenv');
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push('--chdir', plan.cwd, '--');
  return args;
}

/** The scope binds of a plan — read-only paths, `cwd`, writable paths — in descriptor order. */
export function scopeOrder(
  plan: Pick<SandboxPlan, 'cwd' | 'cwdWritable' | 'readOnlyPaths' | 'writablePaths'>,
): { path: string; writable: boolean; order: number }[] {
  return [
    ...plan.readOnlyPaths.map((path) => ({ path, writable: false, order: 0 })),
    { path: plan.cwd, writable: plan.cwdWritable, order: 1 },
    ...(plan.writablePaths ?? []).map((path) => ({ path, writable: true, order: 1 })),
  ];
}

function depth(path: string): number {
  return path.split('/').filter(Boolean).length;
}
