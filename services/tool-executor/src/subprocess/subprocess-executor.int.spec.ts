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
import { commandTools, useReplyServer } from '../../test/command-tools';
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
  const server = useReplyServer('pong');

  const dial = () =>
    `require('net').connect(${server.port()},'localhost').on('data',d=>{console.log(JSON.stringify(String(d)));process.exit(0)}).on('error',e=>{console.log(JSON.stringify(e.code));process.exit(0)})`;
  const networked = (hosts: string[], risk: 'network' | 'execute' = 'network') =>
    tool('dial', [], {
      risk,
      command: { argv: ['/usr/bin/node', '-e', dial()], network: { hosts } },
    });

  it('is given to a network tool whose declared hosts the domain rules allow', async () => {
    expect(await run(callOf(networked(['localhost']), { name: 'x' }))).toEqual({
      ok: true,
      result: 'pong',
    });
    expect(domainChecks).toEqual(['localhost']);
  });

  it('is not given without risk network: the same command is cut off', async () => {
    expect(await run(callOf(networked(['localhost'], 'execute'), { name: 'x' }))).toEqual({
      ok: true,
      result: 'ECONNREFUSED',
    });
    expect(domainChecks).toEqual([]);
  });

  it('refuses the call when the domain rules refuse a declared host', async () => {
    expect(await run(callOf(networked(['localhost', 'evil.example']), { name: 'x' }))).toEqual({
      ok: false,
      error: {
        code: ErrorCode.Denied,
        message: 'dial needs evil.example, which the domain rules refuse',
        details: { host: 'evil.example' },
      },
    });
  });
});
