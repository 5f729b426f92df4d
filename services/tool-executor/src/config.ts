import { z } from 'zod';
import { commaList, NatsEnvShape, natsSettings, type NatsSettings } from '@toolgate/service-kit';

const list = commaList;

const Env = z.object({
  ...NatsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  EXECUTOR_PORT: z.coerce.number().int().min(0).max(65535).default(8082),
  /** The pinned working directory of the builtins (isolation `none` and `readonly`). */
  EXECUTOR_CWD: z.string().default(process.cwd()),
  EXECUTOR_READ_PATHS: list,
  EXECUTOR_WRITE_PATHS: list,
  /** Host environment variables a shell tool may see (comma-separated); default: a safe list. */
  EXECUTOR_ENV_ALLOWLIST: list,
  /**
   * Calls in flight per replica: mostly waiting on the broker or a remote worker, so cheap. What
   * loads the machine — builtins running here — is bounded by EXECUTOR_INPROCESS_CONCURRENCY.
   */
  EXECUTOR_CONCURRENCY: z.coerce.number().int().min(1).max(4096).default(256),
  /** Builtin (in-process) tools running at once per replica; more calls wait for a slot. */
  EXECUTOR_INPROCESS_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(16),
  EXECUTOR_DEFAULT_TIMEOUT_MS: z.coerce.number().int().min(1).default(60_000),
  EXECUTOR_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(30_000),
  EXECUTOR_MAX_DELIVER: z.coerce.number().int().min(1).default(5),
  EXECUTOR_WORKTREE_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
});

export type ExecutorConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    cwd: string;
    readPaths?: string[];
    writePaths?: string[];
    envAllowlist?: string[];
    concurrency: number;
    inprocessConcurrency: number;
    defaultTimeoutMs: number;
    ackWaitMs: number;
    maxDeliver: number;
    worktreeTimeoutMs: number;
  }>;

/** Parses the environment once; defaults live only here. */
export function loadExecutorConfig(env: NodeJS.ProcessEnv): ExecutorConfig {
  const e = Env.parse(env);
  return Object.freeze({
    ...natsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.EXECUTOR_PORT,
    cwd: e.EXECUTOR_CWD,
    ...(e.EXECUTOR_READ_PATHS ? { readPaths: e.EXECUTOR_READ_PATHS } : {}),
    ...(e.EXECUTOR_WRITE_PATHS ? { writePaths: e.EXECUTOR_WRITE_PATHS } : {}),
    ...(e.EXECUTOR_ENV_ALLOWLIST ? { envAllowlist: e.EXECUTOR_ENV_ALLOWLIST } : {}),
    concurrency: e.EXECUTOR_CONCURRENCY,
    inprocessConcurrency: e.EXECUTOR_INPROCESS_CONCURRENCY,
    defaultTimeoutMs: e.EXECUTOR_DEFAULT_TIMEOUT_MS,
    ackWaitMs: e.EXECUTOR_ACK_WAIT_MS,
    maxDeliver: e.EXECUTOR_MAX_DELIVER,
    worktreeTimeoutMs: e.EXECUTOR_WORKTREE_TIMEOUT_MS,
  });
}
