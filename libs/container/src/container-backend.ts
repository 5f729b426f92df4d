import type { ProcessResult } from '@toolgate/sandbox';

/** The resource limits of one container. */
export interface ContainerLimits {
  /** Memory, swap included (cgroup memory limit; a Kubernetes memory limit). */
  memoryBytes: number;
  /** Processes and threads (pids cgroup). Kubernetes: the node's podPidsLimit applies instead. */
  processes: number;
  /** CPU quota in cores. */
  cpus: number;
  /** CPU seconds (RLIMIT_CPU; runc only — a Job's CPU time is bounded by its deadline). */
  cpuSeconds: number;
  /** Open files per process (RLIMIT_NOFILE; runc only). */
  openFiles: number;
  /** The private /tmp (tmpfs; an emptyDir size limit in Kubernetes). */
  tmpBytes: number;
}

/** Limits for a call whose tool and operator name none. */
export const DEFAULT_CONTAINER_LIMITS: Readonly<ContainerLimits> = Object.freeze({
  memoryBytes: 512 * 1024 ** 2,
  processes: 64,
  cpus: 1,
  cpuSeconds: 60,
  openFiles: 256,
  tmpBytes: 64 * 1024 ** 2,
});

/** The operator's maxima: the defaults, with what the operator set instead. Pure. */
export function operatorLimits(set: Partial<ContainerLimits> | undefined): ContainerLimits {
  const out = { ...DEFAULT_CONTAINER_LIMITS };
  for (const key of Object.keys(out) as (keyof ContainerLimits)[]) {
    const value = set?.[key];
    if (typeof value === 'number' && Number.isFinite(value) && value > 0) out[key] = value;
  }
  return out;
}

/**
 * The limits of one container: what the tool asks for, never above the operator's maxima (a tool
 * may lower a limit, not raise it). Pure.
 */
export function containerLimits(
  max: Readonly<ContainerLimits>,
  requested: Partial<ContainerLimits> | undefined,
): ContainerLimits {
  const out = { ...max };
  for (const key of Object.keys(max) as (keyof ContainerLimits)[]) {
    const want = requested?.[key];
    if (typeof want === 'number' && Number.isFinite(want) && want > 0) {
      out[key] = Math.min(max[key], want);
    }
  }
  return out;
}

/** One call to run in a container: the image, the command and everything it is allowed. */
export interface ContainerRequest {
  /** An image reference (see `ContainerSpecSchema`). */
  image: string;
  /** The command, already filled from the input: `argv[0]` is looked up on the image's PATH. */
  argv: readonly string[];
  /** Environment on top of the image's own (the tool's fixed env and Toolgate's variables). */
  env: Readonly<Record<string, string>>;
  /** The call's directory on this machine (runc: bound at /work). */
  cwd: string;
  /** Whether /work is writable (false under read-only isolation). */
  writable: boolean;
  /** Existing protected paths under `cwd` (absolute), bound read-only over /work. */
  protectedPaths: readonly string[];
  /** Whether the container may use the network; false: an empty network namespace. */
  network: boolean;
  /**
   * runc only: a Unix socket on this machine (the call's egress proxy) that 127.0.0.1:3128 in
   * the container's own network namespace reaches, named as the proxy in its environment
   * (`HTTP_PROXY`, …), instead of the host's network. Not with `network`.
   */
  egress?: string;
  /** The call's input as JSON: on stdin (runc) and at /toolgate/input.json (both backends). */
  input: string;
  /** Wall-clock deadline; at it the container is killed. */
  timeoutMs: number;
  /** Cap on each of stdout and stderr (Kubernetes: on the pod's log). */
  maxOutputBytes: number;
  /** Lower limits than the operator's. */
  limits?: Partial<ContainerLimits>;
  /** Aborting kills the container (a cancelled call). */
  signal?: AbortSignal;
  /** Labels for the operator (tool name, dispatch id): names and labels of what is created. */
  labels: { tool: string; dispatchId: string };
}

/**
 * How a container ended, in the terms of a process (exit code, signal, output) — so the
 * subprocess protocol's exit table reads both — plus whether its memory limit killed it.
 */
export interface ContainerResult extends ProcessResult {
  /** The kernel's OOM killer ended a process of the container (its memory limit was reached). */
  memoryExceeded: boolean;
  /**
   * The runtime could not start the command (not found in the image, not executable, a mount it
   * could not make): its message. The exit status is then the runtime's, not the tool's.
   */
  startError?: string;
}

/**
 * Where containers run: `runc` on this machine, or a Kubernetes Job per call. `run` resolves for
 * every ending of the tool (a failing exit, a kill at the deadline); it rejects with a typed error
 * only when the container could not be made at all (a missing image is `config`, an API server
 * that does not answer `unavailable`). When it resolves, nothing of the container runs any more;
 * what is left of it (runc's state, a finished Job until its TTL) is removed afterwards.
 */
export interface ContainerBackend {
  readonly kind: 'runc' | 'kubernetes';
  run(request: ContainerRequest): Promise<ContainerResult>;
  /** Resolves when the clean-up of every finished run is done (a service awaits it on stop). */
  idle(): Promise<void>;
}
