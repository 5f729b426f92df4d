import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  loadAllInOneOptions,
  startAllInOne,
  type AllInOne,
  type AllInOneOptions,
} from '@toolgate/all-in-one';
import type { TokenGrant } from '@toolgate/gateway';
import {
  NATS_URL,
  useTestNats,
  useTestSchema,
  type TestNats,
  type TestSchema,
} from '@toolgate/testing';
import { startToolExecutor } from '@toolgate/tool-executor';

/** Tokens of two tenants, so tests can show one never sees the other. */
export const TOKENS = {
  acmeAdmin: 'acme-admin-token-0123456789',
  acmeAgent: 'acme-agent-token-0123456789',
  acmeApprover: 'acme-approver-token-012345',
  globexAdmin: 'globex-admin-token-01234567',
} as const;

/** The grants behind {@link TOKENS}. */
export const TEST_GRANTS: readonly TokenGrant[] = [
  {
    token: TOKENS.acmeAdmin,
    tenant: 'acme',
    scopes: ['admin', 'dispatch', 'approve'],
    identity: 'acme-admin',
  },
  { token: TOKENS.acmeAgent, tenant: 'acme', scopes: ['dispatch'], identity: 'acme-agent' },
  { token: TOKENS.acmeApprover, tenant: 'acme', scopes: ['approve'], identity: 'acme-approver' },
  {
    token: TOKENS.globexAdmin,
    tenant: 'globex',
    scopes: ['admin', 'dispatch', 'approve'],
    identity: 'globex-admin',
  },
];

/**
 * The environment of an all-in-one that shares this machine's NATS and PostgreSQL (or of the
 * services as processes, see process-stack.ts; `nats.url` names a broker of the caller's own): a
 * stream prefix and schema of its own, free ports, `workdir` as the executor's directory (its worktrees beside
 * it, see {@link removeWorkdir}) and `tokens` as the only grants. Everything else keeps the
 * services' defaults. The system tests and the bench both start their stacks from it.
 */
export function stackEnv(
  nats: Pick<TestNats, 'prefix'> & { url?: string },
  schema: Pick<TestSchema, 'url' | 'schema'>,
  workdir: string,
  tokens: readonly TokenGrant[],
): NodeJS.ProcessEnv {
  return {
    NATS_URL: nats.url ?? NATS_URL,
    TOOLGATE_PREFIX: nats.prefix,
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    EVALUATOR_PORT: '0',
    EXECUTOR_PORT: '0',
    JOURNAL_PORT: '0',
    WORKTREE_PORT: '0',
    DATABASE_URL: schema.url,
    JOURNAL_SCHEMA: schema.schema,
    EXECUTOR_CWD: workdir,
    // Beside the executor's directory, not in it: tests make that directory a git repository.
    WORKTREE_ROOT: `${workdir}-worktrees`,
    TOOLGATE_TOKENS: JSON.stringify(tokens),
  };
}

/** Removes a {@link stackEnv} workdir and the worktrees beside it. */
export async function removeWorkdir(workdir: string): Promise<void> {
  await rm(workdir, { recursive: true, force: true });
  await rm(`${workdir}-worktrees`, { recursive: true, force: true });
}

export interface TestStack {
  all: AllInOne;
  nats: TestNats;
  schema: TestSchema;
  workdir: string;
  options: AllInOneOptions;
  /** Calls the gateway's HTTP API (with `headers` besides the token's, such as a `traceparent`). */
  http(
    method: string,
    route: string,
    token: string | undefined,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }>;
  /**
   * Starts another tool executor on the stack's configuration, to stand in for one a test stopped
   * or crashed. Unlike the stack's own, its fetch-domain check refuses every host.
   */
  startExecutor(): Promise<AllInOne['executor']>;
  /** Restarts the whole stack on the same prefix, schema and workdir. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** The whole of Toolgate in this process, on a stream prefix and schema of the test's own. */
export async function startTestStack(
  label: string,
  overrides: Partial<Record<string, string>> = {},
  /**
   * A broker of the test's own (a cluster's nodes, `startTestBroker`): the stack's and the test's
   * connections go there, and its stream replicas (`env.TOOLGATE_STREAM_REPLICAS`) are the stack's.
   */
  broker?: { servers: string[]; env?: { TOOLGATE_STREAM_REPLICAS: string } },
): Promise<TestStack> {
  const nats = await useTestNats(label, broker ? { servers: broker.servers } : {});
  const schema = await useTestSchema(label);
  const workdir = await mkdtemp(path.join(tmpdir(), `toolgate-${label}-`));
  const env = {
    ...stackEnv(
      broker ? { ...nats, url: broker.servers.join(',') } : nats,
      schema,
      workdir,
      TEST_GRANTS,
    ),
    JOURNAL_SWEEP_INTERVAL_MS: '100',
    EXECUTOR_ACK_WAIT_MS: '2000',
    // No script worker thread at every start: most files run no script, and the first script call
    // starts one (as it would in a pool whose warm worker died); a test may set it back.
    EXECUTOR_SCRIPT_WARM_WORKERS: '0',
    ...(broker?.env ? { TOOLGATE_STREAM_REPLICAS: broker.env.TOOLGATE_STREAM_REPLICAS } : {}),
    ...overrides,
  };
  const options = { ...loadAllInOneOptions(env), logger: false as const };
  let all = await startAllInOne(options);
  const stack: TestStack = {
    get all() {
      return all;
    },
    nats,
    schema,
    workdir,
    options,
    async http(method, route, token, body, headers = {}) {
      const res = await fetch(`${all.gateway.url}${route}`, {
        method,
        headers: {
          ...headers,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined
          ? { body: typeof body === 'string' ? body : JSON.stringify(body) }
          : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    startExecutor() {
      return startToolExecutor({
        config: options.executor,
        checkDomain: () => 'deny',
        logger: false,
      });
    },
    async restart() {
      await all.stop();
      all = await startAllInOne(options);
    },
    async stop() {
      await all.stop();
      await nats.cleanup();
      await schema.cleanup();
      await removeWorkdir(workdir);
    },
  };
  return stack;
}
