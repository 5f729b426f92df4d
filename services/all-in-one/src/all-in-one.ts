import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { ConfigError } from '@toolgate/contracts';
import type { InFlightMessage, JournalStreamOptions } from '@toolgate/bus';
import {
  loadGatewayConfig,
  startGateway,
  type GatewayConfig,
  type TokenGrant,
} from '@toolgate/gateway';
import { loadJournalConfig, startJournal, type JournalConfig } from '@toolgate/journal';
import {
  loadEvaluatorConfig,
  startPermissionEvaluator,
  type EvaluatorConfig,
} from '@toolgate/permission-evaluator';
import { defaultStateDir, startClean, stopOnce, type RunningService } from '@toolgate/service-kit';
import {
  loadExecutorConfig,
  openExecutorPolicy,
  startToolExecutor,
  type ExecutorConfig,
} from '@toolgate/tool-executor';
import { loadWorktreeConfig, startWorktree, type WorktreeConfig } from '@toolgate/worktree';
import path from 'node:path';

/**
 * The development token used when `TOOLGATE_TOKENS` is not set (laptop only; the README shows it).
 * It is not a secret: it exists so the walk-through can be pasted.
 */
export const DEV_TOKEN_GRANT: TokenGrant = {
  token: 'dev-admin-token-change-me',
  tenant: 'dev',
  scopes: ['admin', 'dispatch', 'approve'],
  identity: 'dev',
};

export interface AllInOneOptions {
  gateway: GatewayConfig;
  evaluator: EvaluatorConfig;
  executor: ExecutorConfig;
  journal: JournalConfig;
  worktree: WorktreeConfig;
  streams?: JournalStreamOptions;
  logger?: false;
}

/** Every service of Toolgate, running in this process. */
export interface AllInOne {
  gateway: RunningService;
  evaluator: RunningService;
  executor: RunningService;
  journal: RunningService & { sweeper: { sweep(): Promise<number> } };
  worktree: RunningService;
  /**
   * Stops every service gracefully: the gateway first so no new work comes in, the journal last so
   * it folds what the others appended while they drained, those three side by side between.
   */
  stop(): Promise<void>;
  /** The journal messages every service's handlers are working on now. */
  inFlight(): InFlightMessage[];
  /** A stop past its drain cap: the executor's running calls are killed and handed back. */
  abandon(): Promise<void>;
}

/**
 * The internal services' HTTP ports (health and metrics) in the all-in-one follow the gateway's:
 * `GATEWAY_PORT` + 1..4, so one setting moves every port of a copy and a second copy started with
 * another `GATEWAY_PORT` does not collide with the first; `GATEWAY_PORT=0` makes them all
 * ephemeral. A port set explicitly wins.
 */
const INTERNAL_PORT_OFFSETS = {
  EVALUATOR_PORT: 1,
  EXECUTOR_PORT: 2,
  JOURNAL_PORT: 3,
  WORKTREE_PORT: 4,
} as const;

function internalPorts(gatewayPort: number): Record<keyof typeof INTERNAL_PORT_OFFSETS, string> {
  const last = gatewayPort + Math.max(...Object.values(INTERNAL_PORT_OFFSETS));
  if (gatewayPort !== 0 && last > 65535) {
    throw new ConfigError(
      `GATEWAY_PORT ${gatewayPort} leaves no room for the internal ports (+1..+4); choose a lower one or set EVALUATOR_PORT, EXECUTOR_PORT, JOURNAL_PORT and WORKTREE_PORT`,
    );
  }
  const port = (offset: number) => String(gatewayPort === 0 ? 0 : gatewayPort + offset);
  return {
    EVALUATOR_PORT: port(INTERNAL_PORT_OFFSETS.EVALUATOR_PORT),
    EXECUTOR_PORT: port(INTERNAL_PORT_OFFSETS.EXECUTOR_PORT),
    JOURNAL_PORT: port(INTERNAL_PORT_OFFSETS.JOURNAL_PORT),
    WORKTREE_PORT: port(INTERNAL_PORT_OFFSETS.WORKTREE_PORT),
  };
}

/**
 * The internal services' health and metrics listeners in the all-in-one bind where the gateway
 * binds (`GATEWAY_HOST`): a copy kept to loopback exposes none of its ports to the network. A host
 * set explicitly wins.
 */
function internalHosts(gatewayHost: string): Record<string, string> {
  return Object.fromEntries(
    ['EVALUATOR_HOST', 'EXECUTOR_HOST', 'JOURNAL_HOST', 'WORKTREE_HOST'].map((k) => [
      k,
      gatewayHost,
    ]),
  );
}

/**
 * Where a laptop's worktrees live by default: outside the repository they are made from (git
 * refuses a worktree root inside it), in the user's state directory, one folder per repository.
 */
export function defaultWorktreeRoot(repo: string, env: NodeJS.ProcessEnv): string {
  const state = env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  const key = `${path.basename(repo) || 'root'}-${createHash('sha256').update(repo).digest('hex').slice(0, 12)}`;
  const root = path.join(state, 'toolgate', 'worktrees', key);
  const inside = path.relative(repo, root);
  return inside.startsWith('..') || path.isAbsolute(inside)
    ? root
    : path.join(os.tmpdir(), 'toolgate-worktrees', key);
}

/**
 * The tools' directory on a laptop when EXECUTOR_CWD is not set: an empty folder of the user's
 * state directory, made if missing — never the directory `npm start` runs from, the checkout,
 * whose code the services load (the executor refuses a scope holding it).
 */
export function defaultWorkspace(env: NodeJS.ProcessEnv): string {
  const dir = path.join(defaultStateDir(env), 'workspace');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Reads every service's configuration from one environment, with the laptop defaults. */
export function loadAllInOneOptions(env: NodeJS.ProcessEnv): AllInOneOptions {
  const gateway = loadGatewayConfig(env, (p) => readFileSync(p, 'utf8'));
  env = {
    ...internalPorts(gateway.port),
    ...internalHosts(gateway.host),
    ...(env.EXECUTOR_CWD === undefined ? { EXECUTOR_CWD: defaultWorkspace(env) } : {}),
    ...env,
  };
  // Only when no tokens are configured at all: an explicitly empty list must not enable the
  // well-known development token.
  const tokens =
    env.TOOLGATE_TOKENS === undefined && env.TOOLGATE_TOKENS_FILE === undefined
      ? [DEV_TOKEN_GRANT]
      : gateway.tokens;
  const worktree = loadWorktreeConfig(worktreeEnv(env));
  return {
    gateway: { ...gateway, tokens },
    evaluator: loadEvaluatorConfig(env),
    // The executor runs a worktree-isolated call only under the root the worktree service uses.
    executor: loadExecutorConfig({ ...env, WORKTREE_ROOT: worktree.root }),
    journal: loadJournalConfig(env),
    worktree,
  };
}

/** On a laptop the executor's pinned directory is also the repository agents get worktrees of. */
function worktreeEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const repo = env.WORKTREE_REPO ?? path.resolve(env.EXECUTOR_CWD ?? process.cwd());
  return { WORKTREE_REPO: repo, WORKTREE_ROOT: defaultWorktreeRoot(repo, env), ...env };
}

/**
 * Starts all five services in one Node process: the journal first (so nothing published is missed
 * by the projection — its consumer is durable anyway), then the evaluator, executor and worktree
 * service, and the gateway last, when everything behind it is ready.
 */
export async function startAllInOne(options: AllInOneOptions): Promise<AllInOne> {
  const common = {
    ...(options.streams ? { streams: options.streams } : {}),
    ...(options.logger === false ? { logger: false as const } : {}),
  };
  return startClean(async (opened) => {
    const journal = opened.add(await startJournal({ config: options.journal, ...common }), (s) =>
      s.stop(),
    );
    const evaluator = opened.add(
      await startPermissionEvaluator({ config: options.evaluator, ...common }),
      (s) => s.stop(),
    );
    const policy = await openExecutorPolicy(options.executor, opened);
    const executor = opened.add(
      await startToolExecutor({
        config: options.executor,
        ...policy.decisions,
        sideConnections: [policy.connection],
        ...common,
      }),
      (s) => s.stop(),
    );
    const worktree = opened.add(await startWorktree({ config: options.worktree, ...common }), (s) =>
      s.stop(),
    );
    const gateway = await startGateway({ config: options.gateway, ...common });
    const all: AllInOne = {
      gateway,
      evaluator,
      executor,
      journal,
      worktree,
      inFlight: () =>
        [all.gateway, all.worktree, all.executor, all.evaluator, all.journal].flatMap((s) =>
          s.inFlight(),
        ),
      abandon: async () => {
        await all.executor.abandon?.();
      },
      // Reads the fields at stop time: a test may have replaced a service (a simulated crash).
      // The gateway first, so no new work comes in; then the services behind it side by side (each
      // waits out its current pull, up to a second, to hand back what it brings); the journal last,
      // so what their drains appended is folded before it stops.
      stop: stopOnce(async () => {
        await all.gateway.stop();
        await Promise.all([all.worktree.stop(), all.executor.stop(), all.evaluator.stop()]);
        await all.journal.stop();
        await policy.close();
      }),
    };
    return all;
  });
}
