/**
 * Per-process resource limits of a sandboxed command. Each is a kernel rlimit set by util-linux
 * `prlimit` inside the sandbox, right before the command is executed, so the limits bind the
 * command and everything it starts but not bubblewrap's own set-up.
 */
export interface ResourceLimits {
  /**
   * CPU seconds (RLIMIT_CPU). At the limit the command gets SIGXCPU, one second later SIGKILL.
   * CPU time, not wall time: the call's deadline bounds wall time.
   */
  cpuSeconds: number;
  /**
   * The run's memory, in bytes. With a memory cgroup (the default where the host has one): what
   * the run's whole process tree holds together, its private `/tmp` and `/dev/shm` included — at
   * the limit the kernel's OOM killer ends a process of the run. Without one: each process's
   * address space (RLIMIT_AS), which a run forking N processes holds N times.
   */
  addressSpaceBytes: number;
  /** Open file descriptors per process (RLIMIT_NOFILE). */
  openFiles: number;
  /**
   * Processes and threads (RLIMIT_NPROC, counted per sandbox: each runs in a user namespace of its
   * own). The kernel does not apply RLIMIT_NPROC to root; a pids cgroup enforces it then.
   */
  processes: number;
  /** The largest file the command may write, in bytes (RLIMIT_FSIZE). */
  fileSizeBytes: number;
}

/** Limits for a call whose tool and operator name none (the operator's maxima apply on top). */
export const DEFAULT_LIMITS: Readonly<ResourceLimits> = Object.freeze({
  cpuSeconds: 60,
  addressSpaceBytes: 4 * 1024 ** 3,
  openFiles: 256,
  processes: 64,
  fileSizeBytes: 1024 ** 3,
});

/**
 * The limits one run gets: what the request asks for, never above the operator's maxima (a tool
 * may lower a limit, not raise it). Pure.
 */
export function effectiveLimits(
  max: ResourceLimits,
  requested: Partial<ResourceLimits> | undefined,
): ResourceLimits {
  const pick = (key: keyof ResourceLimits) => {
    const asked = requested?.[key];
    return asked !== undefined && asked > 0 ? Math.min(asked, max[key]) : max[key];
  };
  return {
    cpuSeconds: pick('cpuSeconds'),
    addressSpaceBytes: pick('addressSpaceBytes'),
    openFiles: pick('openFiles'),
    processes: pick('processes'),
    fileSizeBytes: pick('fileSizeBytes'),
  };
}

/**
 * `prlimit` arguments that set `limits` (soft and hard alike, so the command cannot raise them)
 * and then execute what follows. The CPU limit's hard value is one second above the soft one:
 * the command first gets SIGXCPU, which tells a CPU overrun from any other kill. `addressSpace`
 * false leaves RLIMIT_AS unset: a memory cgroup limits the run as a whole instead. Pure.
 */
export function prlimitArgv(
  prlimit: string,
  limits: ResourceLimits,
  { addressSpace = true }: { addressSpace?: boolean } = {},
): string[] {
  const whole = (n: number) => Math.max(1, Math.floor(n));
  const cpu = whole(limits.cpuSeconds);
  return [
    prlimit,
    `--cpu=${cpu}:${cpu + 1}`,
    ...(addressSpace ? [`--as=${whole(limits.addressSpaceBytes)}`] : []),
    `--nofile=${whole(limits.openFiles)}`,
    `--nproc=${whole(limits.processes)}`,
    `--fsize=${whole(limits.fileSizeBytes)}`,
    '--',
  ];
}
