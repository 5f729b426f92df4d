import path from 'node:path';
import { seccompProfile, type SeccompProfile } from './seccomp-profile';

/** Where the call's directory appears inside the container (its working directory). */
export const WORK_DIR = '/work';
/** Where the call's input file appears inside the container (read-only). */
export const INPUT_DIR = '/toolgate';
/** The input file inside the container: `$TOOLGATE_INPUT_FILE`. */
export const INPUT_FILE = `${INPUT_DIR}/input.json`;

/** Everything one runc container is made of; resolved, absolute host paths only. */
export interface RuncPlan {
  /** The image's root file system (mounted read-only). */
  rootfs: string;
  argv: readonly string[];
  /** The whole environment of the process. */
  env: Readonly<Record<string, string>>;
  /** The call's directory on the host, bound at {@link WORK_DIR}. */
  workDir: string;
  /** Whether {@link workDir} is writable (false under read-only isolation). */
  workWritable: boolean;
  /** Existing protected paths under {@link workDir} (host paths), bound read-only over it. */
  protectedPaths: readonly string[];
  /**
   * The folders between {@link workDir} and a protected path (host paths), each bound onto itself
   * (writable as the directory is): a mount point cannot be renamed or removed, so renaming a
   * parent cannot carry a protected path's read-only bind away.
   */
  ancestorPaths?: readonly string[];
  /**
   * Where to bind each protected or ancestor path, and the work directory itself, from, by host
   * path: a staging path the checked descriptor's file is mounted on (see `STAGE_SCRIPT`), so a
   * component swapped for a symlink after the check binds nothing else. Absent: the path itself.
   */
  mountSources?: Readonly<Record<string, string>>;
  /** A host directory holding `input.json`, bound read-only at {@link INPUT_DIR}. */
  inputDir: string;
  /** Share the host's network namespace; false gives an empty one (loopback only). */
  network: boolean;
  /**
   * The `createRuntime` hook that gives the container's own namespace its egress (see
   * `runc-egress.ts`); not with `network`.
   */
  egressHook?: { path: string; args: string[]; timeout: number };
  memoryBytes: number;
  processes: number;
  /** CPU quota in cores (fractions allowed); absent: no quota. */
  cpus?: number;
  /** CPU seconds (RLIMIT_CPU: SIGXCPU at the limit, SIGKILL a second later). */
  cpuSeconds: number;
  /** Size of the private /tmp. */
  tmpBytes: number;
  /** Open files per process (RLIMIT_NOFILE). */
  openFiles: number;
  /** The process's user; root by default, with no capabilities either way. */
  user: { uid: number; gid: number };
}

/** The subset of the OCI runtime spec (1.0.2) that Toolgate writes. */
export interface OciConfig {
  ociVersion: string;
  process: {
    terminal: false;
    user: { uid: number; gid: number; additionalGids?: number[] };
    args: string[];
    env: string[];
    cwd: string;
    capabilities: Record<'bounding' | 'effective' | 'inheritable' | 'permitted' | 'ambient', []>;
    rlimits: { type: string; hard: number; soft: number }[];
    noNewPrivileges: true;
    oomScoreAdj: number;
  };
  root: { path: string; readonly: true };
  hostname: string;
  hooks?: { createRuntime: { path: string; args: string[]; timeout: number }[] };
  mounts: { destination: string; type: string; source: string; options: string[] }[];
  linux: {
    resources: {
      devices: { allow: boolean; access: string }[];
      memory: { limit: number; swap: number };
      pids: { limit: number };
      cpu?: { quota: number; period: number };
    };
    namespaces: { type: string }[];
    seccomp: SeccompProfile;
    maskedPaths: string[];
    readonlyPaths: string[];
  };
}

const CPU_PERIOD_US = 100_000;

/**
 * The OCI runtime configuration of one call: the image's root file system read-only; the call's
 * directory at /work as the only writable host path (its protected paths bound read-only over
 * it, every folder on the way to one bound onto itself); a private /tmp; the input at /toolgate/input.json; new PID, mount, IPC, UTS and network
 * namespaces (the network one left out only when the call may use the network); memory (swap
 * included), pids and CPU limits; no capabilities, no new privileges, a seccomp deny-list. Pure.
 */
export function ociConfig(plan: RuncPlan): OciConfig {
  const inside = (hostPath: string, mode: 'ro' | 'rw') => {
    const rel = path.relative(plan.workDir, hostPath);
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
      throw new Error(`protected path ${hostPath} is not inside ${plan.workDir}`);
    }
    const source = plan.mountSources?.[hostPath] ?? hostPath;
    return bind(source, path.posix.join(WORK_DIR, rel.split(path.sep).join('/')), mode);
  };
  const protectedMounts = [
    ...(plan.ancestorPaths ?? []).map((p) => inside(p, plan.workWritable ? 'rw' : 'ro')),
    ...plan.protectedPaths.map((p) => inside(p, 'ro')),
  ];
  // Parents before children: a protected path's bind must land on the /work bind, not under it.
  protectedMounts.sort((a, b) => a.destination.length - b.destination.length);
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: plan.user.uid, gid: plan.user.gid, additionalGids: [] },
      args: [...plan.argv],
      env: Object.entries(plan.env).map(([k, v]) => `${k}=${v}`),
      cwd: WORK_DIR,
      capabilities: { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] },
      rlimits: [
        { type: 'RLIMIT_NOFILE', hard: plan.openFiles, soft: plan.openFiles },
        { type: 'RLIMIT_CPU', hard: plan.cpuSeconds + 1, soft: plan.cpuSeconds },
      ],
      noNewPrivileges: true,
      // The host's OOM killer picks a tool before anything else on the machine.
      oomScoreAdj: 1000,
    },
    root: { path: plan.rootfs, readonly: true },
    hostname: 'toolgate',
    ...(plan.egressHook ? { hooks: { createRuntime: [plan.egressHook] } } : {}),
    mounts: [
      {
        destination: '/proc',
        type: 'proc',
        source: 'proc',
        options: ['nosuid', 'noexec', 'nodev'],
      },
      {
        destination: '/dev',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
      },
      {
        destination: '/dev/pts',
        type: 'devpts',
        source: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'],
      },
      {
        destination: '/dev/shm',
        type: 'tmpfs',
        source: 'shm',
        options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
      },
      {
        destination: '/sys',
        type: 'sysfs',
        source: 'sysfs',
        options: ['nosuid', 'noexec', 'nodev', 'ro'],
      },
      {
        destination: '/tmp',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['nosuid', 'nodev', 'mode=1777', `size=${Math.max(4096, plan.tmpBytes)}`],
      },
      bind(plan.inputDir, INPUT_DIR, 'ro'),
      // Not rbind: a file system mounted below the call's directory stays out (it could not be
      // made read-only with the rest under read-only isolation).
      bind(
        plan.mountSources?.[plan.workDir] ?? plan.workDir,
        WORK_DIR,
        plan.workWritable ? 'rw' : 'ro',
      ),
      ...protectedMounts,
    ],
    linux: {
      resources: {
        // Only the standard character devices runc creates itself (null, zero, random, tty, …).
        devices: [{ allow: false, access: 'rwm' }],
        // swap = limit: no swap on top of the memory limit (the memsw counter is memory + swap).
        memory: { limit: plan.memoryBytes, swap: plan.memoryBytes },
        pids: { limit: plan.processes },
        ...(plan.cpus
          ? { cpu: { quota: Math.round(plan.cpus * CPU_PERIOD_US), period: CPU_PERIOD_US } }
          : {}),
      },
      namespaces: [
        { type: 'pid' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        ...(plan.network ? [] : [{ type: 'network' }]),
      ],
      seccomp: seccompProfile(),
      maskedPaths: [
        '/proc/acpi',
        '/proc/asound',
        '/proc/kcore',
        '/proc/keys',
        '/proc/latency_stats',
        '/proc/timer_list',
        '/proc/timer_stats',
        '/proc/sched_debug',
        '/proc/scsi',
        '/sys/firmware',
        '/sys/fs/cgroup',
      ],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}

function bind(
  source: string,
  destination: string,
  mode: 'ro' | 'rw',
): { destination: string; type: string; source: string; options: string[] } {
  return { destination, type: 'bind', source, options: ['bind', mode, 'nosuid', 'nodev'] };
}
