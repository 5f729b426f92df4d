import os from 'node:os';
import path from 'node:path';
import { Servers } from '@nats-io/nats-core/internal';
import { parse as parsePgConnectionString } from 'pg-connection-string';
import { z } from 'zod';
import { ConfigError, parseMcpUpstreams, type McpUpstream } from '@toolgate/contracts';
import {
  assertInstallationOutsideToolScope,
  assertStateOutsideToolScope,
  assertStdioScopesApart,
  realLenient,
  signingStatePaths,
  commaList,
  MetricsEnvShape,
  metricsSettings,
  NatsEnvShape,
  natsSettings,
  type MetricsSettings,
  type NatsSettings,
} from '@toolgate/service-kit';
import { parseInternalEntry, SERVICE_PORTS } from './builtins/internal-addresses';

const list = commaList;

const Env = z.object({
  ...NatsEnvShape,
  ...MetricsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  /** MCP servers behind Toolgate (JSON, see `McpUpstreamSchema`): where `mcp` tools are called. */
  TOOLGATE_MCP_UPSTREAMS: z.string().optional(),
  EXECUTOR_PORT: z.coerce.number().int().min(0).max(65535).default(8082),
  /**
   * The interface its health and metrics port listens on (every one by default, for the kubelet's
   * probes and Prometheus; the all-in-one binds it where the gateway binds, `GATEWAY_HOST`).
   */
  EXECUTOR_HOST: z.string().min(1).default('0.0.0.0'),
  /** The pinned working directory of the builtins (isolation `none` and `readonly`). */
  EXECUTOR_CWD: z.string().default(process.cwd()),
  EXECUTOR_READ_PATHS: list,
  EXECUTOR_WRITE_PATHS: list,
  /** Host environment variables a shell tool may see (comma-separated); default: a safe list. */
  EXECUTOR_ENV_ALLOWLIST: list,
  /**
   * Internal addresses http_fetch may connect to (comma-separated addresses or
   * `<address>/<prefix>` blocks: loopback, this host's, private, link-local, …); none by default.
   */
  EXECUTOR_FETCH_INTERNAL: list,
  /**
   * Ports an EXECUTOR_FETCH_INTERNAL entry without a port leaves closed besides the broker's, the
   * database's and Toolgate's own (`servicePortsOf`): comma-separated.
   */
  EXECUTOR_SERVICE_PORTS: list,
  /**
   * Calls in flight per replica: mostly waiting on the broker or a remote worker, so cheap. What
   * loads the machine — tools running here — is bounded by EXECUTOR_INPROCESS_CONCURRENCY.
   */
  EXECUTOR_CONCURRENCY: z.coerce.number().int().min(1).max(4096).default(256),
  /**
   * Tools running at once per replica on this machine — builtins and the subprocess, container and
   * script executors' calls share the slots; more calls wait for one.
   */
  EXECUTOR_INPROCESS_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(16),
  EXECUTOR_DEFAULT_TIMEOUT_MS: z.coerce.number().int().min(1).default(60_000),
  /**
   * How long a delivery may go unheard-from before the broker hands it to another replica: what a
   * crashed replica held comes back within it. Short, because a live replica renews it with
   * in-progress heartbeats (every third of it) for as long as it handles a message.
   */
  EXECUTOR_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(5_000),
  /**
   * Deliveries in flight across ALL replicas of the consumer (the broker's limit, one per
   * consumer): size it replicas × concurrency, or replicas cannot add throughput past it.
   */
  EXECUTOR_MAX_ACK_PENDING: z.coerce.number().int().min(1).default(1000),
  EXECUTOR_MAX_DELIVER: z.coerce.number().int().min(1).default(5),
  /** How long a call under worktree isolation waits for the worktree service's answer. */
  EXECUTOR_WORKTREE_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /**
   * The worktree service's root (the same variable and default as the worktree service's): a call
   * under worktree isolation runs only in `<root>/trees/<its agent's tree id>`, whatever an answer
   * to its acquire names.
   */
  WORKTREE_ROOT: z.string().min(1).default(path.join(os.tmpdir(), 'toolgate-worktrees')),
  /** A directory of script tools (`<name>.js`, optional `<name>.json`) offered to every tenant. */
  EXECUTOR_SCRIPTS_DIR: z.string().min(1).optional(),
  /** Heap of one script call's QuickJS runtime. */
  EXECUTOR_SCRIPT_MEMORY_MB: z.coerce.number().int().min(1).max(1024).default(64),
  /** Interpreter time one script call may spend (it holds the event loop while it runs). */
  EXECUTOR_SCRIPT_CPU_MS: z.coerce.number().int().min(1).max(60_000).default(1000),
  /**
   * Script workers started with the executor, before the first script call (a fresh one costs
   * tens of ms of that call's latency). `0`: the first call starts one (a test stack that runs no
   * script does not pay for a worker thread at every start).
   */
  EXECUTOR_SCRIPT_WARM_WORKERS: z.coerce.number().int().min(0).max(2).default(1),
  /**
   * `on`: `shell` and every `subprocess` tool run under bubblewrap, and a host without it refuses
   * to start. `off` runs `shell` on the host (with the env allowlist and pinned cwd only) and serves
   * no `subprocess` executor. Only an explicit `off` turns it off.
   */
  EXECUTOR_SANDBOX: z.enum(['on', 'off']).default('on'),
  /** Host paths every sandbox sees read-only besides the system directories (e.g. /opt/tools). */
  EXECUTOR_SANDBOX_READ_PATHS: list,
  EXECUTOR_SANDBOX_CPU_SECONDS: z.coerce.number().int().min(1).default(60),
  /**
   * The memory of one call, all its processes and its /tmp and /dev/shm together (a memory cgroup
   * per call); per process (RLIMIT_AS) only on a host without a writable memory cgroup.
   */
  EXECUTOR_SANDBOX_MEMORY_MB: z.coerce.number().int().min(16).default(4096),
  EXECUTOR_SANDBOX_OPEN_FILES: z.coerce.number().int().min(16).default(256),
  EXECUTOR_SANDBOX_PROCESSES: z.coerce.number().int().min(2).default(64),
  /** Size of each call's private /tmp, and of its /dev/shm unless set below. */
  EXECUTOR_SANDBOX_TMP_MB: z.coerce.number().int().min(1).default(64),
  /** Size of each call's private /dev/shm; unset: EXECUTOR_SANDBOX_TMP_MB. */
  EXECUTOR_SANDBOX_SHM_MB: z.coerce.number().int().min(1).optional(),
  /** A pids cgroup directory for per-run cgroups; unset: this process's cgroup v1 pids hierarchy. */
  EXECUTOR_SANDBOX_PIDS_CGROUP: z.string().min(1).optional(),
  /** A memory cgroup directory for per-run cgroups; unset: this process's cgroup v1 memory hierarchy. */
  EXECUTOR_SANDBOX_MEMORY_CGROUP: z.string().min(1).optional(),
  /**
   * Where `container` tools run: `runc` on this machine, `kubernetes` as a Job per call, or `off`
   * (no container executor is served, and registering a container tool fails).
   */
  EXECUTOR_CONTAINER: z.enum(['off', 'runc', 'kubernetes']).default('off'),
  /** runc: the image directory (`<dir>/<reference>/rootfs`). Required for `runc`. */
  EXECUTOR_CONTAINER_IMAGES: z.string().min(1).optional(),
  /** runc: its state and the bundles of running calls. */
  EXECUTOR_CONTAINER_STATE_DIR: z.string().min(1).default('/run/toolgate-runc'),
  EXECUTOR_CONTAINER_MEMORY_MB: z.coerce.number().int().min(8).default(512),
  EXECUTOR_CONTAINER_PROCESSES: z.coerce.number().int().min(2).default(64),
  EXECUTOR_CONTAINER_CPUS: z.coerce.number().positive().max(64).default(1),
  EXECUTOR_CONTAINER_TMP_MB: z.coerce.number().int().min(1).default(64),
  /** Kubernetes: the namespace of the Jobs, their TTL after finishing, the user tools run as. */
  EXECUTOR_K8S_NAMESPACE: z.string().min(1).default('toolgate-tools'),
  EXECUTOR_K8S_JOB_TTL_SECONDS: z.coerce.number().int().min(0).default(300),
  EXECUTOR_K8S_RUN_AS_USER: z.coerce.number().int().min(1).default(65532),
  EXECUTOR_K8S_SERVICE_ACCOUNT: z.string().min(1).optional(),
});

/** What the executor says at start-up when the operator turned the sandbox off. */
export const SANDBOX_OFF_WARNING =
  "toolgate: EXECUTOR_SANDBOX=off — shell commands run on the host with the service user's rights (they can read and write anything it can), and no subprocess tool is served";

/** The sandbox of `shell` and `subprocess` tools, or `off`. */
export type ExecutorSandboxConfig =
  | { mode: 'off' }
  | {
      mode: 'on';
      readOnlyPaths: string[];
      cpuSeconds: number;
      memoryMb: number;
      openFiles: number;
      processes: number;
      tmpMb: number;
      shmMb?: number;
      pidsCgroup?: string;
      memoryCgroup?: string;
    };

/** Where `container` tools run, with the operator's limits; or `off`. */
export type ExecutorContainerConfig =
  | { backend: 'off' }
  | ({
      memoryMb: number;
      processes: number;
      cpus: number;
      tmpMb: number;
    } & (
      | { backend: 'runc'; images: string; stateDir: string }
      | {
          backend: 'kubernetes';
          namespace: string;
          jobTtlSeconds: number;
          runAsUser: number;
          serviceAccount?: string;
        }
    ));

export type ExecutorConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    /** Where its health and metrics port listens. */
    host: string;
    cwd: string;
    readPaths?: string[];
    writePaths?: string[];
    envAllowlist?: string[];
    /** `EXECUTOR_FETCH_INTERNAL`: the internal addresses http_fetch may connect to. */
    fetchInternal: readonly string[];
    /**
     * The ports an `EXECUTOR_FETCH_INTERNAL` entry without a port leaves closed: `SERVICE_PORTS`
     * and those of this process's own broker and database ({@link servicePortsOf}).
     */
    servicePorts: readonly number[];
    concurrency: number;
    inprocessConcurrency: number;
    defaultTimeoutMs: number;
    ackWaitMs: number;
    maxAckPending: number;
    maxDeliver: number;
    worktreeTimeoutMs: number;
    /** The worktree service's root: agents' trees are `<worktreeRoot>/trees/<worktreeId>`. */
    worktreeRoot: string;
    sandbox: ExecutorSandboxConfig;
    container: ExecutorContainerConfig;
    /** Script tools: the directory loaded at start-up, and each call's limits. */
    scripts: { dir?: string; memoryMb: number; cpuMs: number; warmWorkers: number };
    /** The MCP servers `mcp` tools call, with Toolgate's credential for each. */
    mcpUpstreams: McpUpstream[];
    metrics: MetricsSettings;
  }>;

/** Parses the environment once; defaults live only here. */
export function loadExecutorConfig(env: NodeJS.ProcessEnv): ExecutorConfig {
  const e = Env.parse(env);
  assertInstallationOutsideToolScope(env);
  assertStdioScopesApart(env);
  assertStateOutsideToolScope(env, [
    ...signingStatePaths(env),
    // The egress proxies' sockets (the sandbox's `egressRoot`): a run that could see them could
    // use another call's network.
    {
      setting: 'TMPDIR (the egress proxies’ sockets)',
      // As os.tmpdir() reads it, from this environment.
      path: path.join(env.TMPDIR ? path.resolve(env.TMPDIR) : os.tmpdir(), 'toolgate-egress'),
    },
    ...(e.EXECUTOR_CONTAINER === 'runc'
      ? [{ setting: 'EXECUTOR_CONTAINER_STATE_DIR', path: e.EXECUTOR_CONTAINER_STATE_DIR }]
      : []),
  ]);
  const fetchInternal = e.EXECUTOR_FETCH_INTERNAL ?? [];
  const unreadable = fetchInternal.filter((entry) => parseInternalEntry(entry) === undefined);
  if (unreadable.length)
    throw new ConfigError(
      `EXECUTOR_FETCH_INTERNAL: ${unreadable.map((v) => JSON.stringify(v)).join(', ')} is not an address or an <address>/<prefix> block, with or without a :<port> (an IPv6 one in brackets)`,
      { details: { field: 'EXECUTOR_FETCH_INTERNAL' } },
    );
  if (!path.isAbsolute(e.WORKTREE_ROOT))
    throw new ConfigError('WORKTREE_ROOT must be an absolute path', {
      details: { field: 'WORKTREE_ROOT' },
    });
  if (e.EXECUTOR_CONTAINER === 'runc' && !e.EXECUTOR_CONTAINER_IMAGES) {
    throw new ConfigError(
      'EXECUTOR_CONTAINER=runc needs EXECUTOR_CONTAINER_IMAGES, the directory of the images',
      { details: { field: 'EXECUTOR_CONTAINER_IMAGES' } },
    );
  }
  const limits = {
    memoryMb: e.EXECUTOR_CONTAINER_MEMORY_MB,
    processes: e.EXECUTOR_CONTAINER_PROCESSES,
    cpus: e.EXECUTOR_CONTAINER_CPUS,
    tmpMb: e.EXECUTOR_CONTAINER_TMP_MB,
  };
  return Object.freeze({
    ...natsSettings(e),
    metrics: metricsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.EXECUTOR_PORT,
    host: e.EXECUTOR_HOST,
    // Real, once: the sandbox refuses a directory that is (or goes through) a symlink at run time.
    cwd: realLenient(path.resolve(e.EXECUTOR_CWD)),
    ...(e.EXECUTOR_READ_PATHS ? { readPaths: e.EXECUTOR_READ_PATHS } : {}),
    ...(e.EXECUTOR_WRITE_PATHS ? { writePaths: e.EXECUTOR_WRITE_PATHS } : {}),
    ...(e.EXECUTOR_ENV_ALLOWLIST ? { envAllowlist: e.EXECUTOR_ENV_ALLOWLIST } : {}),
    fetchInternal,
    // Its own health and metrics port too, when it is not given one in the environment.
    servicePorts: servicePortsOf(env, e.NATS_URL, [
      ...(e.EXECUTOR_SERVICE_PORTS ?? []),
      ...(e.EXECUTOR_PORT > 0 ? [String(e.EXECUTOR_PORT)] : []),
    ]),
    concurrency: e.EXECUTOR_CONCURRENCY,
    inprocessConcurrency: e.EXECUTOR_INPROCESS_CONCURRENCY,
    defaultTimeoutMs: e.EXECUTOR_DEFAULT_TIMEOUT_MS,
    ackWaitMs: e.EXECUTOR_ACK_WAIT_MS,
    maxAckPending: e.EXECUTOR_MAX_ACK_PENDING,
    maxDeliver: e.EXECUTOR_MAX_DELIVER,
    worktreeTimeoutMs: e.EXECUTOR_WORKTREE_TIMEOUT_MS,
    worktreeRoot: e.WORKTREE_ROOT,
    mcpUpstreams: parseMcpUpstreams(e.TOOLGATE_MCP_UPSTREAMS),
    scripts: {
      ...(e.EXECUTOR_SCRIPTS_DIR ? { dir: e.EXECUTOR_SCRIPTS_DIR } : {}),
      memoryMb: e.EXECUTOR_SCRIPT_MEMORY_MB,
      cpuMs: e.EXECUTOR_SCRIPT_CPU_MS,
      warmWorkers: e.EXECUTOR_SCRIPT_WARM_WORKERS,
    },
    sandbox:
      e.EXECUTOR_SANDBOX === 'off'
        ? { mode: 'off' as const }
        : {
            mode: 'on' as const,
            readOnlyPaths: e.EXECUTOR_SANDBOX_READ_PATHS ?? [],
            cpuSeconds: e.EXECUTOR_SANDBOX_CPU_SECONDS,
            memoryMb: e.EXECUTOR_SANDBOX_MEMORY_MB,
            openFiles: e.EXECUTOR_SANDBOX_OPEN_FILES,
            processes: e.EXECUTOR_SANDBOX_PROCESSES,
            tmpMb: e.EXECUTOR_SANDBOX_TMP_MB,
            ...(e.EXECUTOR_SANDBOX_SHM_MB ? { shmMb: e.EXECUTOR_SANDBOX_SHM_MB } : {}),
            ...(e.EXECUTOR_SANDBOX_PIDS_CGROUP
              ? { pidsCgroup: e.EXECUTOR_SANDBOX_PIDS_CGROUP }
              : {}),
            ...(e.EXECUTOR_SANDBOX_MEMORY_CGROUP
              ? { memoryCgroup: e.EXECUTOR_SANDBOX_MEMORY_CGROUP }
              : {}),
          },
    container:
      e.EXECUTOR_CONTAINER === 'runc'
        ? {
            backend: 'runc' as const,
            images: e.EXECUTOR_CONTAINER_IMAGES!,
            stateDir: e.EXECUTOR_CONTAINER_STATE_DIR,
            ...limits,
          }
        : e.EXECUTOR_CONTAINER === 'kubernetes'
          ? {
              backend: 'kubernetes' as const,
              namespace: e.EXECUTOR_K8S_NAMESPACE,
              jobTtlSeconds: e.EXECUTOR_K8S_JOB_TTL_SECONDS,
              runAsUser: e.EXECUTOR_K8S_RUN_AS_USER,
              ...(e.EXECUTOR_K8S_SERVICE_ACCOUNT
                ? { serviceAccount: e.EXECUTOR_K8S_SERVICE_ACCOUNT }
                : {}),
              ...limits,
            }
          : { backend: 'off' as const },
  });
}

/**
 * Toolgate's other HTTP ports (health, metrics, the gateway's API) as this process is given them;
 * the executor's own, `EXECUTOR_PORT`, its configuration adds (its default included).
 */
const OWN_PORT_SETTINGS = [
  'GATEWAY_PORT',
  'EVALUATOR_PORT',
  'JOURNAL_PORT',
  'WORKTREE_PORT',
] as const;

/**
 * The ports an internal entry without a port leaves closed: {@link SERVICE_PORTS}, the ones this
 * process's own broker (every server of `NATS_URL`, read by the NATS client's own parser) and
 * database (`DATABASE_URL` as `pg` reads it, its query's `port` included; `PGPORT` as `pg` reads it)
 * are served on, Toolgate's own HTTP ports (`GATEWAY_PORT`, `EXECUTOR_PORT`, … as given) and
 * `EXECUTOR_SERVICE_PORTS` (what cannot be derived: a broker's routes, leaf nodes or monitoring on
 * ports of their own, a database the executor has no URL for). A broker or database address the
 * clients could not read either refuses the start (`config`), never falls back to a default.
 */
export function servicePortsOf(
  env: NodeJS.ProcessEnv,
  natsUrl: string,
  extra: readonly string[] = [],
): number[] {
  const ports = new Set(SERVICE_PORTS);
  const add = (setting: string, port: number) => {
    if (!Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new ConfigError(`${setting}: ${port} is not a port`, { details: { field: setting } });
    }
    ports.add(port);
  };
  let servers: number[];
  try {
    servers = new Servers(
      natsUrl
        .split(',')
        .map((server) => server.trim())
        .filter(Boolean),
    )
      .getServers()
      .map((server) => server.port);
  } catch {
    throw new ConfigError('NATS_URL: a server in it is not an address the NATS client reads', {
      details: { field: 'NATS_URL' },
    });
  }
  for (const port of servers) add('NATS_URL', port);
  if (env.DATABASE_URL) {
    let port: string | null | undefined;
    try {
      port = parsePgConnectionString(env.DATABASE_URL).port;
    } catch {
      // Its text is not repeated: it may hold a password.
      throw new ConfigError('DATABASE_URL is not a connection string pg reads', {
        details: { field: 'DATABASE_URL' },
      });
    }
    // A socket (`host=/run/postgresql`) still names the port its server listens on, maybe on TCP.
    add('DATABASE_URL', port ? Number(port) : 5432);
  }
  const pgPort = env.PGPORT === undefined ? NaN : parseInt(env.PGPORT, 10);
  if (!Number.isNaN(pgPort)) add('PGPORT', pgPort);
  for (const setting of OWN_PORT_SETTINGS) {
    const own = env[setting] === undefined ? NaN : parseInt(env[setting], 10);
    if (own > 0) add(setting, own);
  }
  for (const text of extra) {
    add('EXECUTOR_SERVICE_PORTS', /^\d{1,5}$/.test(text) ? Number(text) : NaN);
  }
  return [...ports].sort((a, b) => a - b);
}
