/**
 * The subprocess executor with a real sandbox and real processes: the protocol (JSON in on stdin,
 * JSON out on stdout, exits to typed errors), the argv template, network only when the tool's risk
 * and the domain rules allow it. The registry is a plain lookup here; the pipeline test runs it
 * over NATS.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import { DEFAULT_PROTECTION } from '@toolgate/permissions';
import { Sandbox } from '@toolgate/sandbox';
import { hostAddresses, recordingListener, type RecordingListener } from '@toolgate/testing';
import { commandTools } from '../../test/command-tools';
import type { PendingCall } from '../execution/pending-call';
import { SubprocessExecutor } from './subprocess-executor';

let sandbox: Sandbox;
let work: string;
const { registered, domainChecks, options, tool, callOf, reset } = commandTools('subprocess');

beforeAll(async () => {
  sandbox = await Sandbox.open();
});
beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-subprocess-')));
  reset();
});
afterEach(() => fs.rm(work, { recursive: true, force: true }));

const executor = () =>
  new SubprocessExecutor({
    ...options,
    sandbox,
    protectedPaths: () => DEFAULT_PROTECTION,
    baseEnv: { PATH: '/usr/bin:/bin', HOME: '/root', SECRET_OF_THE_SERVICE: 'never' },
    maxOutputBytes: 64 * 1024,
  });

const run = (call: PendingCall, timeoutMs = 10_000) =>
  executor().run(call, { cwd: work, timeoutMs });

/** A small jq-less JSON tool in sh: reads the input, writes a result naming the input and env. */
const GREET =
  'read -r input; printf \'{"input":%s,"arg":"%s","dispatch":"%s","home":"%s","secret":"%s"}\' ' +
  '"$input" "$1" "$TOOLGATE_DISPATCH_ID" "$HOME" "$SECRET_OF_THE_SERVICE"';

it('gives the input as JSON on stdin and takes the JSON on stdout as the result', async () => {
  const call = callOf(tool('greet', ['/bin/sh', '-c', GREET, 'greet', { input: 'name' }]), {
    name: 'Ada; $(id)',
  });
  expect(await run(call)).toEqual({
    ok: true,
    result: {
      input: { name: 'Ada; $(id)' },
      arg: 'Ada; $(id)',
      dispatch: 'd-1',
      home: '/tmp',
      secret: 'never',
    },
  });
});

it('refuses input that would be an option, before anything runs', async () => {
  const call = callOf(tool('rm_it', ['/bin/rm', { input: 'name' }]), { name: '-rf' });
  expect(await run(call)).toMatchObject({
    ok: false,
    error: { code: ErrorCode.InvalidArguments, details: { issues: [{ path: ['name'] }] } },
  });
});

it('maps a failing exit to tool-failed with stderr, and a declared error to its code', async () => {
  const failing = callOf(tool('fails', ['/bin/sh', '-c', 'echo "no such user" >&2; exit 4']), {
    name: 'x',
  });
  expect(await run(failing)).toEqual({
    ok: false,
    error: {
      code: ErrorCode.ToolFailed,
      message: 'fails exited with code 4',
      details: { exitCode: 4, stderrTail: 'no such user\n' },
    },
  });
  const retry = callOf(
    tool('retry', [
      '/bin/sh',
      '-c',
      'echo \'{"error":{"code":"model-retry","message":"give a full name"}}\'; exit 1',
    ]),
    { name: 'x' },
  );
  expect(await run(retry)).toEqual({
    ok: false,
    error: { code: ErrorCode.ModelRetry, message: 'give a full name' },
  });
  const missing = callOf(tool('missing', ['/nonexistent/tool']), { name: 'x' });
  expect(await run(missing)).toMatchObject({ ok: false, error: { code: ErrorCode.Config } });
  const garbled = callOf(tool('garbled', ['/bin/echo', 'not json']), { name: 'x' });
  expect(await run(garbled)).toMatchObject({
    ok: false,
    error: { code: ErrorCode.NonSerializableResult },
  });
});

it('kills the tool at the call deadline: timeout', async () => {
  const call = callOf(tool('slow', ['/bin/sleep', '30']), { name: 'x' });
  expect(await run(call, 500)).toMatchObject({
    ok: false,
    error: { code: ErrorCode.Timeout, message: 'slow did not finish within 500 ms' },
  });
});

it('writes in the call directory, but not under readonly isolation', async () => {
  const writer = tool('writer', ['/bin/sh', '-c', 'echo data > out.txt && echo true']);
  expect(await run(callOf(writer, { name: 'x' }))).toEqual({ ok: true, result: true });
  expect(await fs.readFile(path.join(work, 'out.txt'), 'utf8')).toBe('data\n');
  await fs.rm(path.join(work, 'out.txt'));
  expect(await run(callOf(writer, { name: 'x' }, { isolation: 'readonly' }))).toMatchObject({
    ok: false,
    error: { code: ErrorCode.ToolFailed },
  });
  await expect(fs.access(path.join(work, 'out.txt'))).rejects.toThrow();
});

it("binds the policy's protected paths in the call directory read-only", async () => {
  await fs.mkdir(path.join(work, 'app'));
  await fs.writeFile(path.join(work, 'app', '.env'), 'TOKEN=1\n');
  await fs.mkdir(path.join(work, '.github', 'workflows'), { recursive: true });
  const tamper = tool('tamper', [
    '/bin/sh',
    '-c',
    'echo EVIL=1 >> app/.env; echo "run: evil" > .github/workflows/ci.yml; echo ok > app/code.ts; echo true',
  ]);
  expect(await run(callOf(tamper, { name: 'x' }))).toEqual({ ok: true, result: true });
  expect(await fs.readFile(path.join(work, 'app', '.env'), 'utf8')).toBe('TOKEN=1\n');
  await expect(fs.access(path.join(work, '.github', 'workflows', 'ci.yml'))).rejects.toThrow();
  expect(await fs.readFile(path.join(work, 'app', 'code.ts'), 'utf8')).toBe('ok\n');
});

describe('protected paths hold on the effect (issue 23, findings 3 and 6)', () => {
  const ORIGINAL = 'on: push\njobs: {}\n';
  beforeEach(async () => {
    await fs.mkdir(path.join(work, '.github', 'workflows'), { recursive: true });
    await fs.writeFile(path.join(work, '.github', 'workflows', 'ci.yml'), ORIGINAL);
  });

  it('mv .github g && mkdir -p .github/workflows && printf … leaves the host workflow as it was', async () => {
    const attacker = tool('attacker', [
      '/bin/sh',
      '-c',
      'mv .github g; mkdir -p .github/workflows && cd .github/workflows && printf pwned > ci.yml; echo true',
    ]);
    expect(await run(callOf(attacker, { name: 'x' }))).toEqual({ ok: true, result: true });
    expect(await fs.readFile(path.join(work, '.github', 'workflows', 'ci.yml'), 'utf8')).toBe(
      ORIGINAL,
    );
  });

  it('a dangling .git symlink an earlier call left does not stop the next calls', async () => {
    await fs.symlink('/nonexistent', path.join(work, '.git'));
    const quiet = tool('quiet', ['/bin/sh', '-c', 'echo true']);
    for (let i = 0; i < 3; i++) {
      expect(await run(callOf(quiet, { name: 'x' }))).toEqual({ ok: true, result: true });
    }
  });
});

it('refuses a call whose contract is no longer the registered one', async () => {
  const call = callOf(tool('greet', ['/bin/true']), { name: 'x' });
  registered.set('acme.greet', { ...tool('greet', ['/bin/true']), description: 'changed' });
  expect(await run(call)).toMatchObject({ ok: false, error: { code: ErrorCode.Conflict } });
});

describe('network', () => {
  let web: RecordingListener;
  beforeAll(async () => {
    web = await recordingListener('127.0.0.1', (_req, res) => res.end('web'));
  });
  afterAll(() => web.close());

  /**
   * The executor with the internal addresses EXECUTOR_FETCH_INTERNAL would open, and domain rules
   * that allow `localhost` and, unless `addressesDenied`, its addresses (each connection's address
   * is checked against them too, as `http_fetch`'s).
   */
  const executorOpening = (internal: string[], addressesDenied = false) =>
    new SubprocessExecutor({
      ...options,
      checkDomain: (_call, host) => {
        domainChecks.push(host);
        const allowed = addressesDenied ? ['localhost'] : ['localhost', '127.0.0.1', '::1'];
        return allowed.includes(host) ? 'allow' : 'deny';
      },
      sandbox,
      protectedPaths: () => DEFAULT_PROTECTION,
      baseEnv: { PATH: '/usr/bin:/bin' },
      maxOutputBytes: 64 * 1024,
      internal,
    });
  const runOpening = (internal: string[], call: PendingCall, addressesDenied = false) =>
    executorOpening(internal, addressesDenied).run(call, { cwd: work, timeoutMs: 15_000 });

  /**
   * A node script that tries each route in turn and prints what each got, as one JSON array:
   * `direct <host> <port>` dials the address itself, `connect <host:port>` asks the proxy of
   * HTTPS_PROXY for a tunnel and sends a GET through it, `get <url>` sends the proxy a plain
   * request. A refusal reads `<status> <body>`; a failed dial its error code.
   */
  const routes = (...tries: string[]) =>
    `const http = require('http'), net = require('net');
const proxy = process.env.HTTPS_PROXY ? new URL(process.env.HTTPS_PROXY) : undefined;
const one = (t) => new Promise((done) => {
  const [how, a, b] = t.split(' ');
  const fail = (e) => done(e.code || e.message);
  const read = (s, prefix, d = '') => { s.on('data', (x) => (d += x)); s.on('end', () => done(prefix + d.trim())); s.on('error', fail); };
  if (how === 'direct') {
    const s = net.connect(Number(b), a, () => s.end('GET / HTTP/1.0\\r\\n\\r\\n'));
    s.setTimeout(3000, () => { s.destroy(); done('timeout'); });
    return read(s, 'reached ');
  }
  if (!proxy) return done('no proxy');
  const req = http.request({ host: proxy.hostname, port: proxy.port, method: how === 'connect' ? 'CONNECT' : 'GET', path: a });
  req.on('error', fail);
  req.on('connect', (res, sock, head) => {
    if (res.statusCode !== 200) return read(sock, res.statusCode + ' ', String(head));
    const got = http.get({ createConnection: () => sock, path: '/tunnelled' }, (r) => read(r, ''));
    got.on('error', fail);
  });
  req.on('response', (res) => read(res, res.statusCode + ' '));
  req.end();
});
(async () => { const out = []; for (const t of ${JSON.stringify(tries)}) out.push(await one(t)); console.log(JSON.stringify(out)); })();`;
  const networked = (
    script: string,
    hosts = ['localhost'],
    risk: 'network' | 'execute' = 'network',
  ) =>
    tool('dial', [], {
      risk,
      command: { argv: ['/usr/bin/node', '-e', script], network: { hosts } },
    });

  it('reaches a declared host through the call’s proxy, by tunnel and by plain request', async () => {
    const script = routes(
      `connect localhost:${web.port}`,
      `get http://localhost:${web.port}/plain`,
    );
    expect(
      await runOpening(['127.0.0.0/8', '::1'], callOf(networked(script), { name: 'x' })),
    ).toEqual({
      ok: true,
      result: ['web', '200 web'],
    });
    expect(web.seen.slice(-2)).toEqual(['/tunnelled', '/plain']);
    expect(domainChecks).toContain('localhost');
  });

  it('reaches nothing else: the host’s loopback services, the broker and the database are out of its network', async () => {
    const seen = web.seen.length;
    const script = routes(
      `direct 127.0.0.1 ${web.port}`,
      'direct 127.0.0.1 4222',
      'direct 127.0.0.1 5432',
      ...hostAddresses().map((a) => `direct ${a} ${web.port}`),
      `connect 127.0.0.1:${web.port}`,
      'connect example.com:443',
      `get http://127.0.0.1:${web.port}/literal`,
      'get https://localhost/',
      'connect localhost',
    );
    const outcome = await runOpening(
      ['127.0.0.0/8', '::1'],
      callOf(networked(script), { name: 'x' }),
    );
    expect(outcome.ok).toBe(true);
    const got = (outcome as { result: string[] }).result;
    const direct = 3 + hostAddresses().length;
    for (const dial of got.slice(0, direct))
      expect(['ECONNREFUSED', 'ENETUNREACH']).toContain(dial);
    expect(got.slice(direct)).toEqual([
      `403 dial: 127.0.0.1 is not a host the tool declares`,
      '403 dial: example.com is not a host the tool declares',
      `403 dial: 127.0.0.1 is not a host the tool declares`,
      '400 https: goes through CONNECT, not a forwarded request',
      '400 CONNECT needs host:port',
    ]);
    expect(web.seen.length).toBe(seen);
  });

  it('refuses a declared name of an internal address unless the operator opened it', async () => {
    const seen = web.seen.length;
    const script = routes(`connect localhost:${web.port}`, `get http://localhost:${web.port}/x`);
    const outcome = await runOpening([], callOf(networked(script), { name: 'x' }));
    expect(outcome).toMatchObject({ ok: true });
    for (const refusal of (outcome as { result: string[] }).result) {
      expect(refusal).toMatch(/^403 dial: host (localhost resolves to )?(127\.0\.0\.1|::1)/);
      expect(refusal).toContain('EXECUTOR_FETCH_INTERNAL');
    }
    expect(web.seen.length).toBe(seen);
  });

  it('checks every connection’s address against the domain rules, as http_fetch does', async () => {
    const seen = web.seen.length;
    const script = routes(`connect localhost:${web.port}`, `get http://localhost:${web.port}/x`);
    const outcome = await runOpening(
      ['127.0.0.0/8', '::1'],
      callOf(networked(script), { name: 'x' }),
      true,
    );
    expect(outcome).toMatchObject({ ok: true });
    for (const refusal of (outcome as { result: string[] }).result) {
      expect(refusal).toMatch(
        /^403 dial: host localhost resolves to (127\.0\.0\.1|::1), which the domain rules do not allow$/,
      );
    }
    expect(web.seen.length).toBe(seen);
  });

  it('is not given without risk network: no proxy, and the same dials are cut off', async () => {
    const script = routes(`direct 127.0.0.1 ${web.port}`, `connect localhost:${web.port}`);
    expect(
      await runOpening(
        ['127.0.0.0/8'],
        callOf(networked(script, ['localhost'], 'execute'), { name: 'x' }),
      ),
    ).toEqual({ ok: true, result: ['ECONNREFUSED', 'no proxy'] });
    expect(domainChecks).toEqual([]);
  });

  it('refuses the call when the domain rules refuse a declared host', async () => {
    expect(await run(callOf(networked('0', ['localhost', 'evil.example']), { name: 'x' }))).toEqual(
      {
        ok: false,
        error: {
          code: ErrorCode.Denied,
          message: 'dial needs evil.example, which the domain rules refuse',
          details: { host: 'evil.example' },
        },
      },
    );
  });
});
