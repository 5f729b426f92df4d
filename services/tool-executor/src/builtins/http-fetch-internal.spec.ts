import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, ErrorCode } from '@toolgate/contracts';
import { recordingListener, type RecordingListener } from '@toolgate/testing';
import { runTool, type ToolDef } from '@toolgate/tools';
import { builtin, errorOf, ok, toolContext } from '../../test/tool-harness';
import { loadExecutorConfig } from '../config';
import { parseExecutionPolicy } from './execution-policy';
import type { HttpFetchResult } from './http-fetch-tool';
import { InternalAllowance, isInternalAddress, parseInternalEntry } from './internal-addresses';

/**
 * The services beside the executor — the broker's monitoring, a database, the cloud's metadata
 * service, the executor's own ports — are out of a tool call's reach unless the operator names
 * them (`EXECUTOR_FETCH_INTERNAL`), whatever the tenant's domain rules say: here they allow every
 * host. Each attack is checked on the listener (it saw no request), not only on the answer.
 */
/** http_fetch with domain rules that allow every host, and the executor's `http.internal`. */
const fetcher = (internal?: string[], servicePorts?: number[]): ToolDef =>
  builtin('http_fetch', {
    policy: {
      cwd: '/',
      ...(internal ? { http: { internal, ...(servicePorts ? { servicePorts } : {}) } } : {}),
    },
    checkDomain: () => 'allow',
  });

const ownAddress = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && !a.internal && a.family === 'IPv4')?.address;

let secret: RecordingListener;

beforeAll(async () => {
  // Every address, both families: a service listening on "all interfaces".
  secret = await recordingListener('::', (_req, res) => res.end('SECRET'));
});

afterAll(async () => {
  await secret.close();
});

describe('by default', () => {
  const tool = fetcher();
  const spellings = [
    '127.0.0.1',
    '127.0.0.2',
    'localhost',
    'LocalHost.',
    '0',
    '0.0.0.0',
    '2130706433',
    '0x7f.1',
    '[::1]',
    '[::]',
    '[::ffff:127.0.0.1]',
    '[64:ff9b::7f00:1]',
    ...(ownAddress ? [ownAddress] : []),
  ];

  it.each(spellings)(
    'refuses http://%s/ as internal, and the listener sees nothing',
    async (spelling) => {
      const result = await runTool(
        tool,
        { url: `http://${spelling}:${secret.port}/` },
        toolContext('/'),
      );
      const error = errorOf(result);
      expect(error.code).toBe(ErrorCode.Denied);
      expect(error.message).toContain('EXECUTOR_FETCH_INTERNAL');
      expect(error.details).toMatchObject({ internal: true });
      expect(secret.seen).toEqual([]);
    },
  );

  it.each([
    '169.254.169.254',
    '10.0.0.1',
    '172.16.5.4',
    '192.168.1.1',
    '100.64.0.1',
    '[fd00:ec2::254]',
    '[fe80::1]',
    '224.0.0.1',
  ])(
    'refuses http://%s/ before connecting (a metadata service, a private network)',
    async (host) => {
      const error = errorOf(await runTool(tool, { url: `http://${host}/` }, toolContext('/')));
      expect(error.code).toBe(ErrorCode.Denied);
      expect(error.details).toMatchObject({ internal: true });
    },
  );
});

describe('with the addresses the operator names', () => {
  let hop: RecordingListener;

  beforeAll(async () => {
    // On 127.0.0.1, which is named below: it redirects to loopback addresses that are not.
    hop = await recordingListener('127.0.0.1', (req, res) => {
      const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to');
      if (to) res.writeHead(302, { location: to }).end();
      else res.end('named');
    });
  });

  afterAll(async () => {
    await hop.close();
  });

  it('reaches them, in any spelling of the address', async () => {
    const tool = fetcher(['127.0.0.1']);
    for (const url of [
      `http://127.0.0.1:${hop.port}/`,
      `http://[::ffff:127.0.0.1]:${hop.port}/`,
      `http://localhost:${hop.port}/`,
    ]) {
      const result = ok<HttpFetchResult>(await runTool(tool, { url }, toolContext('/')));
      expect({ url, body: result.body }).toEqual({ url, body: 'named' });
    }
  });

  it('refuses a redirect from one of them to another internal address', async () => {
    const tool = fetcher(['127.0.0.1/32']);
    const seenBefore = hop.seen.length;
    for (const target of [
      `http://127.0.0.2:${secret.port}/`,
      `http://[::1]:${secret.port}/`,
      `http://0:${secret.port}/`,
    ]) {
      const url = `http://127.0.0.1:${hop.port}/?to=${encodeURIComponent(target)}`;
      const error = errorOf(await runTool(tool, { url }, toolContext('/')));
      expect({ target, code: error.code, internal: error.details?.internal }).toEqual({
        target,
        code: ErrorCode.Denied,
        internal: true,
      });
    }
    expect(hop.seen.length).toBe(seenBefore + 3);
    expect(secret.seen).toEqual([]);
  });

  it('reaches an address named with a port on that port only, redirects included', async () => {
    // The hop is named on its own port; the other listener stands for what shares the address
    // (the broker, a database) on another port.
    const tool = fetcher([`127.0.0.1:${hop.port}`]);
    const reached = ok<HttpFetchResult>(
      await runTool(tool, { url: `http://localhost:${hop.port}/` }, toolContext('/')),
    );
    expect(reached.body).toBe('named');
    const seenBefore = hop.seen.length;
    for (const url of [
      `http://127.0.0.1:${secret.port}/`,
      `http://localhost:${secret.port}/`,
      `http://127.0.0.1:${hop.port}/?to=${encodeURIComponent(`http://127.0.0.1:${secret.port}/`)}`,
    ]) {
      const error = errorOf(await runTool(tool, { url }, toolContext('/')));
      expect({ url, code: error.code, details: error.details }).toEqual({
        url,
        code: ErrorCode.Denied,
        details: expect.objectContaining({ port: secret.port, internal: true }),
      });
      expect(error.message).toContain(`on port ${secret.port}`);
    }
    expect(hop.seen.length).toBe(seenBefore + 1); // the redirect's first hop
    expect(secret.seen).toEqual([]);
    // Red team: port 0 was checked as the default port (80 here, as named) but dialled as 0.
    const zero = errorOf(
      await runTool(fetcher(['127.0.0.1:80']), { url: 'http://127.0.0.1:0/' }, toolContext('/')),
    );
    expect({ code: zero.code, details: zero.details }).toEqual({
      code: ErrorCode.Denied,
      details: expect.objectContaining({ port: 0, internal: true }),
    });
  });

  it("leaves a service port (the broker's, the database's) closed to an entry on every port: only one naming the port opens it", async () => {
    // The listener stands for the broker: its port is a service port here, as the executor's
    // NATS_URL makes 4222.
    const servicePorts = [4222, secret.port];
    for (const [entries, url] of [
      [['127.0.0.0/8', '::1'], `http://127.0.0.1:${secret.port}/`],
      [['127.0.0.1'], `http://localhost:${secret.port}/`],
      [
        ['127.0.0.1'],
        `http://127.0.0.1:${hop.port}/?to=${encodeURIComponent(`http://127.0.0.1:${secret.port}/`)}`,
      ],
      [[`127.0.0.1:${hop.port}`, '127.0.0.1'], `http://[::ffff:127.0.0.1]:${secret.port}/`],
    ] as const) {
      const error = errorOf(
        await runTool(fetcher([...entries], servicePorts), { url }, toolContext('/')),
      );
      expect({ url, code: error.code, details: error.details }).toEqual({
        url,
        code: ErrorCode.Denied,
        details: expect.objectContaining({ port: secret.port, internal: true, servicePort: true }),
      });
      expect(error.message).toContain(`naming the port (127.0.0.1:${secret.port})`);
    }
    expect(secret.seen).toEqual([]);
    // Every other port of the block stays open, and naming the port opens it.
    const other = await runTool(
      fetcher(['127.0.0.1'], servicePorts),
      { url: `http://127.0.0.1:${hop.port}/` },
      toolContext('/'),
    );
    expect(ok<HttpFetchResult>(other).body).toBe('named');
    const named = await runTool(
      fetcher(['127.0.0.1', `127.0.0.1:${secret.port}`], servicePorts),
      { url: `http://127.0.0.1:${secret.port}/` },
      toolContext('/'),
    );
    expect(ok<HttpFetchResult>(named).body).toBe('SECRET');
    secret.seen.length = 0;
  });

  it('reaches a whole block when it names one', async () => {
    const tool = fetcher(['127.0.0.0/8', '::1']);
    for (const host of ['127.0.0.2', '[::1]']) {
      const result = await runTool(
        tool,
        { url: `http://${host}:${secret.port}/` },
        toolContext('/'),
      );
      expect(ok<HttpFetchResult>(result).body).toBe('SECRET');
    }
    secret.seen.length = 0;
  });
});

it('tells internal addresses from the internet', () => {
  for (const a of [
    '127.0.0.1',
    '0.0.0.0',
    '10.1.2.3',
    '169.254.169.254',
    '::1',
    'fd00::1',
    '255.255.255.255',
  ])
    expect({ a, internal: isInternalAddress(a) }).toEqual({ a, internal: true });
  for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', 'example.com'])
    expect({ a, internal: isInternalAddress(a) }).toEqual({ a, internal: false });
  const named = new InternalAllowance([
    '10.0.0.0/8',
    '::ffff:192.168.0.0/112',
    '127.0.0.1:8080',
    '172.16.0.0/12:5432',
    '[fd00::/8]:443',
  ]);
  expect(named.refusal('10.9.9.9', 22)).toBeUndefined();
  expect(named.refusal('192.168.3.4', 80)).toBeUndefined();
  expect(named.refusal('192.169.0.1', 80)).toBeUndefined(); // not internal at all
  expect(named.refusal('172.16.0.1', 5432)).toBeUndefined();
  expect(named.refusal('172.16.0.1', 5433)).toBe('internal');
  expect(named.refusal('127.0.0.1', 8080)).toBeUndefined();
  expect(named.refusal('127.0.0.1', 4222)).toBe('internal');
  expect(named.refusal('127.0.0.2', 8080)).toBe('internal');
  expect(named.refusal('fd12::1', 443)).toBeUndefined();
  expect(named.refusal('fd12::1', 80)).toBe('internal');
  // The service ports: closed to an entry on every port, open to one naming them.
  for (const port of [4222, 5432, 6222, 7422, 8222])
    expect({ port, why: named.refusal('10.1.1.1', port) }).toEqual({ port, why: 'service-port' });
  expect(named.refusal('172.16.0.1', 5432)).toBeUndefined();
  expect(named.refusal('10.1.1.1', 4223)).toBeUndefined();
  expect(new InternalAllowance(['10.0.0.0/8'], [4223]).refusal('10.1.1.1', 4223)).toBe(
    'service-port',
  );
  expect(new InternalAllowance(['10.0.0.0/8'], [4223]).refusal('10.1.1.1', 4222)).toBeUndefined();
});

it('reads an entry with a port: IPv4 after a colon, IPv6 in brackets, a block on one port', () => {
  expect(
    [
      '127.0.0.1:8080',
      '10.0.0.0/8:5432',
      '[::1]:8080',
      '[fd00::/8]:443',
      '[::1]',
      '::1',
      '10.0.0.0/8',
    ].map(parseInternalEntry),
  ).toEqual([
    { address: '127.0.0.1', prefix: 32, port: 8080 },
    { address: '10.0.0.0', prefix: 8, port: 5432 },
    { address: '::1', prefix: 128, port: 8080 },
    { address: 'fd00::', prefix: 8, port: 443 },
    { address: '::1', prefix: 128 },
    { address: '::1', prefix: 128 },
    { address: '10.0.0.0', prefix: 8 },
  ]);
  for (const entry of [
    '127.0.0.1:0',
    '127.0.0.1:65536',
    '127.0.0.1:',
    '127.0.0.1:http',
    '[127.0.0.1]:80',
    '[::1]:',
    '[::1/129]:80',
    'localhost:80',
    '10.0.0.0/33:80',
    // Red team: an IPv6 address with a port unbracketed is another address (IPv4-compatible,
    // `0.1.128.128`), which would have been opened on every port; a zone the check would drop.
    '::1:8080',
    '::7f00:1',
    'fe80::1%lo',
    '[fe80::1%eth0]:80',
  ])
    expect({ entry, parsed: parseInternalEntry(entry) }).toEqual({ entry, parsed: undefined });
});

// A directory of its own: the checkout may itself sit in the temporary directory (CI's clone).
const cwd = mkdtempSync(path.join(os.tmpdir(), 'tg-fetch-internal-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));
const executorConfig = (env: NodeJS.ProcessEnv) =>
  loadExecutorConfig({ EXECUTOR_CWD: cwd, ...env });

it('refuses an entry that is not an address or a block, naming the setting', () => {
  expect(() => parseExecutionPolicy({ cwd: '/', http: { internal: ['10.0.0.0/33'] } })).toThrow(
    ConfigError,
  );
  for (const value of [
    '10.0.0.0/33',
    'localhost',
    '10.0.0.0/8,::1/129',
    '1.2.3.4/x',
    '127.0.0.1:0',
    '::1:8080,[::1]:x',
  ]) {
    expect(() => executorConfig({ EXECUTOR_FETCH_INTERNAL: value })).toThrow(
      /EXECUTOR_FETCH_INTERNAL/,
    );
  }
  expect(
    executorConfig({ EXECUTOR_FETCH_INTERNAL: '10.0.0.0/8, ::1, 127.0.0.1:8080, [::1]:8080' })
      .fetchInternal,
  ).toEqual(['10.0.0.0/8', '::1', '127.0.0.1:8080', '[::1]:8080']);
  expect(executorConfig({}).fetchInternal).toEqual([]);
});

it("adds the ports of the executor's own broker, database and HTTP listeners to the service ports", () => {
  const base = [4222, 5432, 6222, 7422, 8222];
  const with_ = (...ports: number[]) => [...new Set([...base, ...ports])].sort((a, b) => a - b);
  // The executor's own HTTP port is always one (8082 unless EXECUTOR_PORT says).
  expect(executorConfig({}).servicePorts).toEqual(with_(8082));
  expect(
    executorConfig({
      NATS_URL: 'nats://a:4223, tls://b:4224,c:4225,d',
      DATABASE_URL: 'postgres://u:p@db:6543/x',
      PGPORT: '6544',
      GATEWAY_PORT: '18080',
      EXECUTOR_PORT: '18082',
      EXECUTOR_SERVICE_PORTS: '9222, 4248',
    }).servicePorts,
  ).toEqual(with_(4223, 4224, 4225, 6543, 6544, 18080, 18082, 9222, 4248));
  // Read as the clients read them (a red team's table, 2026-12-07: each left the port open).
  for (const [env, port] of [
    [{ DATABASE_URL: 'postgres://db/toolgate?port=5433' }, 5433],
    [{ DATABASE_URL: 'postgres:///toolgate?host=/run/postgresql&port=5433' }, 5433],
    [{ DATABASE_URL: 'postgres://u:p@/toolgate?host=127.0.0.1&port=5433' }, 5433],
    [{ DATABASE_URL: 'postgres://db:5433/toolgate?port=5434' }, 5434],
    [{ PGPORT: ' 5433' }, 5433],
    [{ PGPORT: '5433\n' }, 5433],
    [{ PGPORT: '+5433' }, 5433],
    [{ NATS_URL: 'nats://::ffff:127.0.0.1:4223' }, 4223],
    [{ NATS_URL: 'nats://a:4223 nats://b:4224' }, 4224],
    [{ NATS_URL: 'ws://h:80' }, 80],
    [{ NATS_URL: 'https://h:443' }, 443],
    [{ NATS_URL: 'nats://[::1]:4226' }, 4226],
  ] as const) {
    expect({ env, has: executorConfig(env).servicePorts.includes(port) }).toEqual({
      env,
      has: true,
    });
  }
  for (const env of [
    { EXECUTOR_SERVICE_PORTS: 'x' },
    { EXECUTOR_SERVICE_PORTS: '70000' },
    { DATABASE_URL: 'postgres://u:secret@db:99999/x' },
  ]) {
    expect(() => executorConfig(env)).toThrow(ConfigError);
  }
  expect(() => executorConfig({ DATABASE_URL: 'postgres://u:secret@db:99999/x' })).not.toThrow(
    /secret/,
  );
});
