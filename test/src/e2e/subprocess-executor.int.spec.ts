/**
 * A registered subprocess tool dispatched through the whole pipeline over real NATS: gateway →
 * evaluator → executor (bubblewrap) → journal. The containment itself is proved in
 * libs/sandbox and the executor's own specs; this proves the wiring end to end.
 */
import { readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { recordingListener, type RecordingListener } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

const call = dispatchRequests('run-subprocess', 'subprocess', 15_000);

/** Counts the words of `text` and reads notes.txt from the call's directory. */
const WORD_COUNT =
  'read -r input; words=$(printf %s "$1" | wc -w); ' +
  'printf \'{"words":%d,"notes":"%s","input":%s}\' "$words" "$(cat notes.txt)" "$input"';

const textParams = {
  type: 'object',
  properties: { text: { type: 'string' } },
  required: ['text'],
};

describe('subprocess executor through the pipeline', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('subprocess');
    await writeFile(path.join(stack.workdir, 'notes.txt'), 'from the workdir');
  });
  afterAll(() => stack.stop());

  it('is served: registering a subprocess tool needs a command', async () => {
    const refused = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: {
        name: 'no_command',
        description: 'Has no command.',
        parameters: textParams,
        policy: { executor: 'subprocess', risk: 'read' },
      },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: 'config', details: { tool: 'no_command' } });
  });

  it('settles ok with the JSON the tool wrote, run in the call directory', async () => {
    const registered = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: {
        name: 'word_count',
        description: 'Counts the words of a text.',
        parameters: textParams,
        policy: {
          executor: 'subprocess',
          risk: 'read',
          command: { argv: ['/bin/sh', '-c', WORD_COUNT, 'word_count', { input: 'text' }] },
        },
      },
    });
    expect(registered.status).toBe(201);

    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('word_count', { text: 'one two $(three) *' }),
    );
    expect(res.body).toMatchObject({
      status: 'accepted',
      state: 'settled',
      settled: {
        outcome: 'ok',
        result: { words: 4, notes: 'from the workdir', input: { text: 'one two $(three) *' } },
      },
    });
    const view = await settled(stack, res.body.dispatchId);
    expect(view.events.map((e) => e.event.type)).toEqual([
      'requested',
      'decided',
      'started',
      'settled',
    ]);
    expect(view.events[2]!.event).toMatchObject({ executor: 'subprocess', cwd: stack.workdir });
  });

  it('maps a failing exit to a typed error with the exit code and stderr', async () => {
    await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: {
        name: 'always_fails',
        description: 'Fails.',
        parameters: textParams,
        policy: {
          executor: 'subprocess',
          risk: 'read',
          command: { argv: ['/bin/sh', '-c', 'echo "bad text" >&2; exit 3'] },
        },
      },
    });
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('always_fails', { text: 'x' }),
    );
    expect(res.body.settled).toMatchObject({
      outcome: 'error',
      error: {
        code: 'tool-failed',
        message: 'always_fails exited with code 3',
        details: { exitCode: 3, stderrTail: 'bad text\n' },
      },
    });
  });

  it('settles invalid-arguments when the input cannot fill the argv', async () => {
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('word_count', { text: '--help' }),
    );
    expect(res.body.settled).toMatchObject({
      outcome: 'error',
      error: { code: 'invalid-arguments', details: { issues: [{ path: ['text'] }] } },
    });
  });
});

/**
 * A networked tool (risk `network`, declared host `localhost`): what it dials on the host itself,
 * and what its proxy (the only way out of its network namespace) answers for its declared host.
 */
const DIALS = `const http = require('http'), net = require('net');
const dial = (port) => new Promise((done) => {
  const s = net.connect(port, '127.0.0.1', () => { s.destroy(); done('reached'); });
  s.on('error', (e) => done(e.code));
});
const viaProxy = (url) => new Promise((done) => {
  const proxy = new URL(process.env.HTTP_PROXY);
  const req = http.get({ host: proxy.hostname, port: proxy.port, path: url }, (res) => {
    let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => done(res.statusCode + ' ' + body.trim()));
  });
  req.on('error', (e) => done(e.code));
});
const tunnel = (target) => new Promise((done) => {
  const proxy = new URL(process.env.HTTP_PROXY);
  const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: target });
  req.on('connect', (res, socket) => { socket.destroy(); done(res.statusCode); });
  req.on('response', (res) => { res.resume(); done(res.statusCode); });
  req.on('error', (e) => done(e.code));
  req.end();
});
(async () => {
  const [url] = process.argv.slice(1);
  console.log(JSON.stringify({ nats: await dial(4222), postgres: await dial(5432), proxied: await viaProxy(url), brokerTunnel: await tunnel('localhost:4222') }));
})();`;

/** What the executor is told (`webPort`: the declared service's), and what the broker's port gets. */
const settings: [string, string, (webPort: number) => Record<string, string>, number][] = [
  ['by default', 'subprocessnet', () => ({}), 403],
  // A block on every port opens every port but the service ports: the broker's stays closed.
  [
    'with EXECUTOR_FETCH_INTERNAL opening loopback on every port',
    'subprocessnetin',
    () => ({ EXECUTOR_FETCH_INTERNAL: '127.0.0.0/8' }),
    403,
  ],
  // Only an entry naming the broker's port opens it.
  [
    "with EXECUTOR_FETCH_INTERNAL opening loopback and naming the broker's port",
    'subprocessnetsvc',
    () => ({ EXECUTOR_FETCH_INTERNAL: '127.0.0.0/8,::1,127.0.0.1:4222,[::1]:4222' }),
    200,
  ],
  [
    "with EXECUTOR_FETCH_INTERNAL opening the declared service's port only",
    'subprocessnetport',
    (webPort) => ({ EXECUTOR_FETCH_INTERNAL: `127.0.0.1:${webPort},[::1]:${webPort}` }),
    403,
  ],
];

describe.each(settings)(
  'a networked subprocess tool through the pipeline, %s',
  (_name, prefix, envFor, brokerTunnel) => {
    let stack: TestStack;
    let web: RecordingListener;
    let env: Record<string, string>;
    const dispatchOf = dispatchRequests(`run-${prefix}`, prefix, 15_000);

    beforeAll(async () => {
      web = await recordingListener('127.0.0.1', (_req, res) => res.end('the declared service'));
      env = envFor(web.port);
      stack = await startTestStack(prefix, env);
      const registered = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
        tool: {
          name: 'dialer',
          description: 'Dials the broker and the database, and fetches a URL through its proxy.',
          parameters: {
            type: 'object',
            properties: { url: { type: 'string' } },
            required: ['url'],
          },
          policy: {
            executor: 'subprocess',
            risk: 'network',
            command: {
              argv: ['/usr/bin/node', '-e', DIALS, { input: 'url' }],
              network: { hosts: ['localhost'] },
            },
          },
        },
      });
      expect(registered.status).toBe(201);
    });
    afterAll(async () => {
      await stack?.stop();
      await web?.close();
    });

    it('reaches neither the broker nor the database; its declared host (and port) only as the setting allows', async () => {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        dispatchOf('dialer', { url: `http://localhost:${web.port}/declared` }),
      );
      const opened = 'EXECUTOR_FETCH_INTERNAL' in env;
      expect(res.body.settled).toMatchObject({
        outcome: 'ok',
        result: {
          nats: 'ECONNREFUSED',
          postgres: 'ECONNREFUSED',
          proxied: opened
            ? '200 the declared service'
            : expect.stringMatching(
                /^403 dialer: host localhost resolves to .*EXECUTOR_FETCH_INTERNAL/,
              ),
          brokerTunnel,
        },
      });
      expect(web.seen).toEqual(opened ? ['/declared'] : []);
    });

    it('leaves no directory of its calls’ egress sockets behind once the executor stops', async () => {
      // The executor runs in this process: its sandbox's directory is named after this pid.
      const mine = async () =>
        (await readdir(os.tmpdir())).filter((n) => n.startsWith(`toolgate-egress-${process.pid}-`));
      // The call above made one (and the file's other stacks may have theirs): this one must go.
      const before = new Set(await mine());
      expect(before.size).toBeGreaterThan(0);
      await stack.all.executor.stop();
      const after = new Set(await mine());
      expect([...before].filter((n) => !after.has(n))).toHaveLength(1);
    });
  },
);
