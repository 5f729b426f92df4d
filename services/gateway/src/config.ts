import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import {
  assertStateOutsideToolScope,
  signingStatePaths,
  MetricsEnvShape,
  metricsSettings,
  NatsEnvShape,
  natsSettings,
  type MetricsSettings,
  type NatsSettings,
} from '@toolgate/service-kit';
import {
  ConfigError,
  parseMcpUpstreams,
  ScopeSchema,
  TraceUrlTemplateSchema,
  type McpUpstream,
} from '@toolgate/contracts';

/** One bearer token: the tenant it acts for, its scopes and the identity journaled as the actor. */
export const TokenGrantSchema = z
  .strictObject({
    /** The token itself, or (preferred in production) its sha256 hex digest. */
    token: z.string().min(16).optional(),
    tokenSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    tenant: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/),
    scopes: z.array(ScopeSchema).min(1),
    identity: z.string().min(1).max(256),
  })
  .refine(
    (g) => Boolean(g.token) !== Boolean(g.tokenSha256),
    'give exactly one of token or tokenSha256',
  );
export type TokenGrant = z.infer<typeof TokenGrantSchema>;

const Env = z.object({
  ...NatsEnvShape,
  ...MetricsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  /** MCP servers behind Toolgate (JSON, see `McpUpstreamSchema`): what an admin may import. */
  TOOLGATE_MCP_UPSTREAMS: z.string().optional(),
  GATEWAY_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  GATEWAY_HOST: z.string().default('0.0.0.0'),
  /** JSON array of token grants; or a path to a file holding it in TOOLGATE_TOKENS_FILE. */
  TOOLGATE_TOKENS: z.string().optional(),
  TOOLGATE_TOKENS_FILE: z.string().optional(),
  /** How long `wait: true` blocks for a settled result (a numeric `wait` is the caller's own). */
  GATEWAY_WAIT_DEFAULT_MS: z.coerce.number().int().min(0).default(30_000),
  GATEWAY_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(5_000),
  /**
   * The HMAC key that seals the MCP edge's `requestState` (at least 32 bytes), or a file holding
   * it. Every gateway replica needs the same one; unset, each process draws its own, so a state is
   * only accepted by the replica that minted it.
   */
  GATEWAY_MCP_STATE_KEY: z.string().optional(),
  GATEWAY_MCP_STATE_KEY_FILE: z.string().optional(),
  /** How long a parked call's `requestState` is accepted (seconds). */
  GATEWAY_MCP_STATE_TTL_S: z.coerce.number().int().min(10).max(86_400).default(300),
  /** How long a retried parked call waits for its resolution before pausing again. */
  GATEWAY_MCP_APPROVAL_WAIT_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
  /** How often a running MCP call that asked for progress is told it still runs (0: never). */
  GATEWAY_MCP_PROGRESS_INTERVAL_MS: z.coerce.number().int().min(0).default(5_000),
  /** Comma-separated hostnames a browser's `Origin` may name on `/mcp` (none: no Origin passes). */
  GATEWAY_MCP_ALLOWED_ORIGINS: z.string().default('localhost,127.0.0.1,[::1]'),
  /** The gateway's public base URL, for the MCP resource metadata (else each request's Host). */
  GATEWAY_PUBLIC_URL: z.url().optional(),
  /** Comma-separated authorization server URLs the MCP resource metadata advertises. */
  GATEWAY_MCP_AUTHORIZATION_SERVERS: z.string().default(''),
  /** Comma-separated URLs that receive approval:pending / approval:resolved (see docs/approvals.md). */
  GATEWAY_APPROVAL_WEBHOOK_URLS: z.string().optional(),
  /** The HMAC key of the webhooks' signatures; required with URLs. */
  GATEWAY_APPROVAL_WEBHOOK_SECRET: z.string().min(16).optional(),
  GATEWAY_APPROVAL_WEBHOOK_ATTEMPTS: z.coerce.number().int().min(1).max(20).default(5),
  GATEWAY_APPROVAL_WEBHOOK_BACKOFF_MS: z.coerce.number().int().min(1).default(1_000),
  /** The key resolve links are signed with: without it no link is made or accepted. */
  GATEWAY_APPROVAL_LINK_SECRET: z.string().min(16).optional(),
  GATEWAY_APPROVAL_LINK_TTL_MS: z.coerce.number().int().min(1_000).default(3_600_000),
  GATEWAY_APPROVAL_LINK_IDENTITY: z.string().min(1).max(256).default('approval-link'),
  /** A trace UI URL with `{traceId}` where a dispatch's trace id goes (see docs/configuration.md). */
  GATEWAY_TRACE_UI_URL: TraceUrlTemplateSchema.optional(),
});

/** The MCP edge's settings. The state key is a secret: it never appears in an error. */
export interface McpEdgeSettings {
  stateKey: Uint8Array;
  stateTtlSeconds: number;
  approvalWaitMs: number;
  progressIntervalMs: number;
  allowedOrigins: string[];
  publicUrl?: string;
  authorizationServers: string[];
}

export interface GatewayConfig extends NatsSettings {
  prefix: string;
  port: number;
  host: string;
  tokens: TokenGrant[];
  waitDefaultMs: number;
  requestTimeoutMs: number;
  metrics: MetricsSettings;
  mcp: McpEdgeSettings;
  /** The MCP servers an admin may import tools from. */
  mcpUpstreams: McpUpstream[];
  /** Approval webhooks (null: none configured). */
  webhooks: {
    urls: string[];
    secret: string;
    attempts: number;
    backoffMs: number;
  } | null;
  links: {
    secret: string | undefined;
    ttlMs: number;
    identity: string;
    publicUrl: string | undefined;
  };
  /** The trace UI link template (`{traceId}` in it), or null: no trace links. */
  traceUrlTemplate: string | null;
}

/**
 * Parses the environment once; defaults live only here. A bad value is a ConfigError (`config`)
 * naming the setting; token values and keys never appear in errors.
 */
export function loadGatewayConfig(
  env: NodeJS.ProcessEnv,
  readFile: (path: string) => string,
): Readonly<GatewayConfig> {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    // Paths and messages only: the values may be secrets.
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String),
      message: i.message,
    }));
    const first = issues[0];
    throw new ConfigError(
      `invalid gateway configuration: ${first?.path.join('.') ?? '?'}: ${first?.message ?? ''}`,
      { details: { issues } },
    );
  }
  const e = parsed.data;
  assertStateOutsideToolScope(env, [
    ...signingStatePaths(env),
    ...(e.TOOLGATE_TOKENS_FILE
      ? [{ setting: 'TOOLGATE_TOKENS_FILE', path: e.TOOLGATE_TOKENS_FILE }]
      : []),
  ]);
  const raw =
    e.TOOLGATE_TOKENS ?? (e.TOOLGATE_TOKENS_FILE ? readFile(e.TOOLGATE_TOKENS_FILE) : undefined);
  let tokens: TokenGrant[] = [];
  if (raw !== undefined) {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      throw new ConfigError('TOOLGATE_TOKENS is not valid JSON');
    }
    const parsed = z.array(TokenGrantSchema).safeParse(json);
    if (!parsed.success) {
      // Only paths and messages: never the values, which are secrets.
      const where = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      throw new ConfigError(`TOOLGATE_TOKENS is invalid: ${where}`);
    }
    tokens = parsed.data;
  }
  return Object.freeze({
    ...natsSettings(e),
    metrics: metricsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.GATEWAY_PORT,
    host: e.GATEWAY_HOST,
    tokens,
    waitDefaultMs: e.GATEWAY_WAIT_DEFAULT_MS,
    requestTimeoutMs: e.GATEWAY_REQUEST_TIMEOUT_MS,
    mcp: Object.freeze(mcpSettings(e, readFile)),
    mcpUpstreams: parseMcpUpstreams(e.TOOLGATE_MCP_UPSTREAMS),
    webhooks: webhookSettings(e),
    links: {
      secret: e.GATEWAY_APPROVAL_LINK_SECRET,
      ttlMs: e.GATEWAY_APPROVAL_LINK_TTL_MS,
      identity: e.GATEWAY_APPROVAL_LINK_IDENTITY,
      publicUrl: e.GATEWAY_PUBLIC_URL,
    },
    traceUrlTemplate: e.GATEWAY_TRACE_UI_URL ?? null,
  });
}

const list = (value: string) =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);

function mcpSettings(e: z.infer<typeof Env>, readFile: (path: string) => string): McpEdgeSettings {
  const key =
    e.GATEWAY_MCP_STATE_KEY ??
    (e.GATEWAY_MCP_STATE_KEY_FILE ? readFile(e.GATEWAY_MCP_STATE_KEY_FILE).trim() : undefined);
  let stateKey: Uint8Array;
  if (key === undefined) {
    stateKey = randomBytes(32);
  } else {
    stateKey = new TextEncoder().encode(key);
    if (stateKey.length < 32)
      throw new ConfigError('GATEWAY_MCP_STATE_KEY must be at least 32 bytes');
  }
  return {
    stateKey,
    stateTtlSeconds: e.GATEWAY_MCP_STATE_TTL_S,
    approvalWaitMs: e.GATEWAY_MCP_APPROVAL_WAIT_MS,
    progressIntervalMs: e.GATEWAY_MCP_PROGRESS_INTERVAL_MS,
    allowedOrigins: list(e.GATEWAY_MCP_ALLOWED_ORIGINS),
    ...(e.GATEWAY_PUBLIC_URL ? { publicUrl: e.GATEWAY_PUBLIC_URL } : {}),
    authorizationServers: list(e.GATEWAY_MCP_AUTHORIZATION_SERVERS),
  };
}

function webhookSettings(e: z.infer<typeof Env>): GatewayConfig['webhooks'] {
  const urls = list(e.GATEWAY_APPROVAL_WEBHOOK_URLS ?? '');
  if (urls.length === 0) return null;
  for (const url of urls) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
      throw new ConfigError('GATEWAY_APPROVAL_WEBHOOK_URLS holds a URL that is not http(s)');
  }
  if (!e.GATEWAY_APPROVAL_WEBHOOK_SECRET)
    throw new ConfigError(
      'GATEWAY_APPROVAL_WEBHOOK_URLS needs GATEWAY_APPROVAL_WEBHOOK_SECRET to sign with',
    );
  return {
    urls,
    secret: e.GATEWAY_APPROVAL_WEBHOOK_SECRET,
    attempts: e.GATEWAY_APPROVAL_WEBHOOK_ATTEMPTS,
    backoffMs: e.GATEWAY_APPROVAL_WEBHOOK_BACKOFF_MS,
  };
}
