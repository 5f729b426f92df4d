import { createHash } from 'node:crypto';
import { loadGatewayConfig } from './config';

const TOKEN = 'super-secret-token-value-0123456789';
const noFile = (path: string): string => {
  throw new Error(`unexpected read of ${path}`);
};

/** The refusal of a configuration: always a ConfigError, by its stable code. */
function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    expect(err).toMatchObject({ code: 'config', retryable: false });
    return err as Error;
  }
  throw new Error('expected the configuration to be refused');
}

describe('loadGatewayConfig', () => {
  it('applies the defaults and has no tokens when none are configured', () => {
    const config = loadGatewayConfig({}, noFile);
    expect(config).toEqual({
      natsUrl: 'nats://127.0.0.1:4222',
      streamReplicas: 1,
      signing: { required: false },
      prefix: 'toolgate',
      port: 8080,
      host: '0.0.0.0',
      tokens: [],
      waitDefaultMs: 30_000,
      requestTimeoutMs: 5_000,
      metrics: { labels: ['tenant', 'tool'], labelCap: 50 },
      mcp: {
        stateKey: expect.any(Uint8Array),
        stateTtlSeconds: 300,
        approvalWaitMs: 10_000,
        progressIntervalMs: 5_000,
        allowedOrigins: ['localhost', '127.0.0.1', '[::1]'],
        authorizationServers: [],
      },
      mcpUpstreams: [],
      webhooks: null,
      links: {
        secret: undefined,
        ttlMs: 3_600_000,
        identity: 'approval-link',
        publicUrl: undefined,
      },
      traceUrlTemplate: null,
    });
    expect(config.mcp.stateKey).toHaveLength(32);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('takes the MCP state key from the environment or a file and refuses a short one without echoing it', () => {
    const key = 'k'.repeat(40);
    expect(
      Buffer.from(
        loadGatewayConfig({ GATEWAY_MCP_STATE_KEY: key }, noFile).mcp.stateKey,
      ).toString(),
    ).toBe(key);
    const fromFile = loadGatewayConfig(
      { GATEWAY_MCP_STATE_KEY_FILE: '/run/secrets/mcp' },
      () => `${key}\n`,
    );
    expect(Buffer.from(fromFile.mcp.stateKey).toString()).toBe(key);
    const err = errorOf(() => loadGatewayConfig({ GATEWAY_MCP_STATE_KEY: 'short-secret' }, noFile));
    expect(err.message).toContain('at least 32 bytes');
    expect(err.message).not.toContain('short-secret');
  });

  it('takes approval webhooks only with a secret to sign them, and only http(s) URLs', () => {
    const hooks = {
      GATEWAY_APPROVAL_WEBHOOK_URLS: 'https://hooks.example/a, http://10.0.0.1/b',
      GATEWAY_APPROVAL_WEBHOOK_SECRET: 'sixteen-chars-0123',
    };
    expect(loadGatewayConfig(hooks, noFile).webhooks).toEqual({
      urls: ['https://hooks.example/a', 'http://10.0.0.1/b'],
      secret: 'sixteen-chars-0123',
      attempts: 5,
      backoffMs: 1_000,
    });
    expect(
      errorOf(() =>
        loadGatewayConfig({ GATEWAY_APPROVAL_WEBHOOK_URLS: 'https://hooks.example/a' }, noFile),
      ).message,
    ).toMatch(/needs GATEWAY_APPROVAL_WEBHOOK_SECRET/);
    expect(
      errorOf(() =>
        loadGatewayConfig(
          { ...hooks, GATEWAY_APPROVAL_WEBHOOK_URLS: 'file:///etc/passwd' },
          noFile,
        ),
      ).message,
    ).toMatch(/not http\(s\)/);
    // A secret too short to sign with: refused by name, never echoed.
    const short = errorOf(() =>
      loadGatewayConfig({ ...hooks, GATEWAY_APPROVAL_WEBHOOK_SECRET: 'short-hook-key' }, noFile),
    );
    expect(short.message).toMatch(
      /^invalid gateway configuration: GATEWAY_APPROVAL_WEBHOOK_SECRET: /,
    );
    expect(JSON.stringify(short)).not.toContain('short-hook-key');
  });

  it('takes a trace UI template only as an http(s) URL that marks {traceId}, without credentials', () => {
    const template = 'https://grafana.example/explore?trace={traceId}';
    expect(loadGatewayConfig({ GATEWAY_TRACE_UI_URL: template }, noFile).traceUrlTemplate).toBe(
      template,
    );
    for (const bad of [
      'https://grafana.example/explore',
      'javascript:alert(1)//{traceId}',
      'https://admin:hunter2-secret@grafana.example/{traceId}',
    ]) {
      const err = errorOf(() => loadGatewayConfig({ GATEWAY_TRACE_UI_URL: bad }, noFile));
      expect(err.message).toContain('GATEWAY_TRACE_UI_URL');
      expect(err.message).not.toContain('hunter2');
    }
  });

  it('parses TOOLGATE_TOKENS grants', () => {
    const grants = [
      { token: TOKEN, tenant: 'acme', identity: 'user:alice', scopes: ['dispatch', 'approve'] },
      {
        tokenSha256: createHash('sha256').update(TOKEN).digest('hex'),
        tenant: 'globex',
        identity: 'svc:ci',
        scopes: ['admin'],
      },
    ];
    const config = loadGatewayConfig(
      { TOOLGATE_TOKENS: JSON.stringify(grants), GATEWAY_PORT: '9090' },
      noFile,
    );
    expect(config.tokens).toEqual(grants);
    expect(config.port).toBe(9090);
  });

  it('reads the grants from TOOLGATE_TOKENS_FILE when TOOLGATE_TOKENS is unset', () => {
    const grants = [{ token: TOKEN, tenant: 'acme', identity: 'user:alice', scopes: ['dispatch'] }];
    const read: string[] = [];
    const config = loadGatewayConfig(
      { TOOLGATE_TOKENS_FILE: '/run/secrets/tokens.json' },
      (path) => {
        read.push(path);
        return JSON.stringify(grants);
      },
    );
    expect(read).toEqual(['/run/secrets/tokens.json']);
    expect(config.tokens).toEqual(grants);
  });

  it('refuses TOOLGATE_TOKENS that is not JSON without echoing the value', () => {
    const err = errorOf(() =>
      loadGatewayConfig({ TOOLGATE_TOKENS: `[{"token": "${TOKEN}", "tenant": "acme",` }, noFile),
    );
    expect(err.message).toBe('TOOLGATE_TOKENS is not valid JSON');
    expect(err.message).not.toContain(TOKEN);
    expect(err.cause).toBeUndefined();
  });

  it.each([
    [
      'a token that is too short',
      [{ token: 'short-secret', tenant: 'acme', identity: 'u', scopes: ['dispatch'] }],
      'short-secret',
    ],
    [
      'an unknown scope',
      [{ token: TOKEN, tenant: 'acme', identity: 'u', scopes: ['root'] }],
      TOKEN,
    ],
    [
      'a bad tenant',
      [{ token: TOKEN, tenant: 'acme corp', identity: 'u', scopes: ['dispatch'] }],
      TOKEN,
    ],
    [
      'both token and tokenSha256',
      [
        {
          token: TOKEN,
          tokenSha256: 'a'.repeat(64),
          tenant: 'acme',
          identity: 'u',
          scopes: ['dispatch'],
        },
      ],
      TOKEN,
    ],
    [
      'an uppercase digest',
      [
        {
          tokenSha256: 'ABCDEF'.repeat(10) + 'ABCD',
          tenant: 'acme',
          identity: 'u',
          scopes: ['dispatch'],
        },
      ],
      'ABCDEFABCDEF',
    ],
    [
      'a misspelt field',
      [{ tokn: TOKEN, tenant: 'acme', identity: 'u', scopes: ['dispatch'] }],
      TOKEN,
    ],
  ])('refuses grants with %s, naming where without the secret', (_what, grants, secret) => {
    const err = errorOf(() =>
      loadGatewayConfig({ TOOLGATE_TOKENS: JSON.stringify(grants) }, noFile),
    );
    expect(err.message).toMatch(/^TOOLGATE_TOKENS is invalid: /);
    expect(err.message).not.toContain(secret);
  });
});
