import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  loadAllInOneOptions,
  startAllInOne,
  type AllInOne,
  type AllInOneOptions,
} from '@toolgate/all-in-one';
import {
  NATS_URL,
  useTestNats,
  useTestSchema,
  type TestNats,
  type TestSchema,
} from '@toolgate/testing';

/** Tokens of two tenants, so tests can show one never sees the other. */
export const TOKENS = {
  acmeAdmin: 'acme-admin-token-0123456789',
  acmeAgent: 'acme-agent-token-0123456789',
  acmeApprover: 'acme-approver-token-012345',
  globexAdmin: 'globex-admin-token-01234567',
} as const;

const grants = [
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

export interface TestStack {
  all: AllInOne;
  nats: TestNats;
  schema: TestSchema;
  workdir: string;
  options: AllInOneOptions;
  /** Calls the gateway's HTTP API. */
  http(
    method: string,
    route: string,
    token: string | undefined,
    body?: unknown,
  ): Promise<{ status: number; body: any }>;
  /** Restarts the whole stack on the same prefix, schema and workdir. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** The whole of Toolgate in this process, on a stream prefix and schema of the test's own. */
export async function startTestStack(
  label: string,
  overrides: Partial<Record<string, string>> = {},
): Promise<TestStack> {
  const nats = await useTestNats(label);
  const schema = await useTestSchema(label);
  const workdir = await mkdtemp(path.join(tmpdir(), `toolgate-${label}-`));
  const env = {
    NATS_URL,
    TOOLGATE_PREFIX: nats.prefix,
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    EVALUATOR_PORT: '0',
    EXECUTOR_PORT: '0',
    JOURNAL_PORT: '0',
    DATABASE_URL: schema.url,
    JOURNAL_SCHEMA: schema.schema,
    JOURNAL_SWEEP_INTERVAL_MS: '100',
    EXECUTOR_CWD: workdir,
    EXECUTOR_ACK_WAIT_MS: '2000',
    TOOLGATE_TOKENS: JSON.stringify(grants),
    WORKTREE_ROOT: `${workdir}-worktrees`,
    WORKTREE_PORT: '0',
    ...overrides,
  };
  const options = { ...loadAllInOneOptions(env as NodeJS.ProcessEnv), logger: false as const };
  let all = await startAllInOne(options);
  const stack: TestStack = {
    get all() {
      return all;
    },
    nats,
    schema,
    workdir,
    options,
    async http(method, route, token, body) {
      const res = await fetch(`${all.gateway.url}${route}`, {
        method,
        headers: {
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
    async restart() {
      await all.stop();
      all = await startAllInOne(options);
    },
    async stop() {
      await all.stop();
      await nats.cleanup();
      await schema.cleanup();
      await rm(workdir, { recursive: true, force: true });
      await rm(`${workdir}-worktrees`, { recursive: true, force: true });
    },
  };
  return stack;
}
