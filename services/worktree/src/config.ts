import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import {
  assertStateOutsideToolScope,
  signingStatePaths,
  commaList,
  NatsEnvShape,
  natsSettings,
  type NatsSettings,
} from '@toolgate/service-kit';
import { ConfigError } from '@toolgate/contracts';

const list = commaList;

const Env = z.object({
  ...NatsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  WORKTREE_PORT: z.coerce.number().int().min(0).max(65535).default(8084),
  /**
   * The interface its health and metrics port listens on (every one by default, for the kubelet's
   * probes and Prometheus; the all-in-one binds it where the gateway binds, `GATEWAY_HOST`).
   */
  WORKTREE_HOST: z.string().min(1).default('0.0.0.0'),
  /** The volume trees and their records live on; must be outside every host repository. */
  WORKTREE_ROOT: z.string().default(path.join(os.tmpdir(), 'toolgate-worktrees')),
  /** The host repository an acquire without `repo` branches from. */
  WORKTREE_REPO: z.string().optional(),
  /** Repositories an acquire may name (comma-separated); default: only WORKTREE_REPO when set. */
  WORKTREE_ALLOWED_REPOS: list,
  WORKTREE_PIN_CAP: z.coerce.number().int().min(0).max(1000).default(4),
  WORKTREE_KEEP_ON_ERROR: z
    .enum(['true', 'false', '1', '0'])
    .default('false')
    .transform((v) => v === 'true' || v === '1'),
});

/** The worktree service's configuration. */
export type WorktreeConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    /** Where its health and metrics port listens. */
    host: string;
    root: string;
    repo?: string;
    allowedRepos?: string[];
    pinCap: number;
    keepOnError: boolean;
  }>;

/** Parses the environment once; defaults live only here. A bad value is a ConfigError naming it. */
export function loadWorktreeConfig(env: NodeJS.ProcessEnv): WorktreeConfig {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new ConfigError(
      `invalid worktree configuration: ${first?.path.join('.') ?? '?'}: ${first?.message ?? ''}`,
      {
        details: {
          issues: parsed.error.issues.map((i) => ({
            path: i.path.map(String),
            message: i.message,
          })),
        },
      },
    );
  }
  const e = parsed.data;
  for (const [name, value] of [
    ['WORKTREE_ROOT', e.WORKTREE_ROOT],
    ['WORKTREE_REPO', e.WORKTREE_REPO],
  ] as const) {
    if (value !== undefined && !path.isAbsolute(value))
      throw new ConfigError(`${name} must be an absolute path`);
  }
  // Other runs' worktrees and the service's records live under the root: no tool may see them.
  assertStateOutsideToolScope(env, [
    ...signingStatePaths(env),
    { setting: 'WORKTREE_ROOT', path: e.WORKTREE_ROOT },
  ]);
  const allowedRepos =
    e.WORKTREE_ALLOWED_REPOS ?? (e.WORKTREE_REPO ? [e.WORKTREE_REPO] : undefined);
  return Object.freeze({
    ...natsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.WORKTREE_PORT,
    host: e.WORKTREE_HOST,
    root: e.WORKTREE_ROOT,
    ...(e.WORKTREE_REPO ? { repo: e.WORKTREE_REPO } : {}),
    ...(allowedRepos ? { allowedRepos } : {}),
    pinCap: e.WORKTREE_PIN_CAP,
    keepOnError: e.WORKTREE_KEEP_ON_ERROR,
  });
}
