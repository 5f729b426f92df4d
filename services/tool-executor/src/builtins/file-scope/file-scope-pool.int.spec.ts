import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { Sandbox } from '@toolgate/sandbox';
import { eventually } from '@toolgate/testing';
import { FileScopePool, type CallBounds, type FileScope } from './file-scope-pool';

/** The pool's lifecycle with real helpers: killed, cancelled, bounded, idle, closed. */

let sandbox: Sandbox;
let work: string;
let scope: FileScope;
const pools: FileScopePool[] = [];

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const bounds = (signal = new AbortController().signal, timeoutMs?: number): CallBounds => ({
  tool: 'grep',
  signal,
  ...(timeoutMs
    ? {
        timeout: {
          ms: timeoutMs,
          error: () => new ToolgateError(ErrorCode.Timeout, 'too slow'),
        },
      }
    : {}),
});

const read = (pool: FileScopePool, signal?: AbortSignal) =>
  pool.call(
    scope,
    'read',
    { cwd: work, roots: [work], path: 'a.txt', first: 1, last: null, cap: 1024 },
    bounds(signal),
  );

/** A pattern that backtracks for ages on the file's one line: it holds its helper. */
const evilGrep = (pool: FileScopePool, signal?: AbortSignal, timeoutMs?: number) =>
  pool.call(
    scope,
    'grep',
    {
      cwd: work,
      roots: [work],
      path: 'evil.txt',
      pattern: '^(a+)+$',
      flags: '',
      maxMatches: 10,
      maxFiles: 10,
      maxFileBytes: 1024,
    },
    bounds(signal, timeoutMs),
  );

function pool(options: ConstructorParameters<typeof FileScopePool>[1] = {}): FileScopePool {
  const p = new FileScopePool(sandbox, options);
  pools.push(p);
  return p;
}

beforeAll(async () => {
  sandbox = await Sandbox.open();
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-pool-')));
  await fs.writeFile(path.join(work, 'a.txt'), 'hello\n');
  await fs.writeFile(path.join(work, 'evil.txt'), `${'a'.repeat(40)}!\n`);
  scope = { cwd: work, writable: true, readOnlyPaths: [], writablePaths: [] };
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  await fs.rm(work, { recursive: true, force: true });
});

it('reuses one helper for a scope, and replaces a helper that died', async () => {
  const p = pool();
  expect(await read(p)).toMatchObject({ ok: true, result: { content: 'hello\n' } });
  expect(await read(p)).toMatchObject({ ok: true });
  const [first] = p.pids();
  expect(p.pids()).toHaveLength(1);
  process.kill(first!, 'SIGKILL');
  await eventually(() => (p.size === 0 ? true : undefined), { what: 'the dead helper dropped' });
  expect(await read(p)).toMatchObject({ ok: true, result: { content: 'hello\n' } });
  expect(p.pids()).toHaveLength(1);
  expect(p.pids()[0]).not.toBe(first);
});

it('a cancelled or timed-out call kills its helper mid-regex; the next call gets a fresh one', async () => {
  const p = pool();
  // A warm helper: the grep below is mid-regex, not booting, when the abort comes.
  expect(await read(p)).toMatchObject({ ok: true });
  const [busy] = p.pids();
  const abort = new AbortController();
  const grep = evilGrep(p, abort.signal);
  setTimeout(() => abort.abort(), 100);
  await expect(grep).rejects.toMatchObject({ code: ErrorCode.Cancelled });
  await eventually(() => (alive(busy!) ? undefined : true), { what: 'the helper killed' });
  await expect(evilGrep(p, undefined, 200)).rejects.toMatchObject({ code: ErrorCode.Timeout });
  expect(await read(p)).toMatchObject({ ok: true });
});

it('bounds the helpers of one scope; calls beyond wait for one', async () => {
  const p = pool({ maxPerScope: 2 });
  let most = 0;
  const watch = setInterval(() => (most = Math.max(most, p.size)), 5);
  try {
    const results = await Promise.all(Array.from({ length: 12 }, () => read(p)));
    expect(results.every((r) => r.ok)).toBe(true);
  } finally {
    clearInterval(watch);
  }
  expect(most).toBeLessThanOrEqual(2);
  expect(p.size).toBeLessThanOrEqual(2);
});

it('stops idle helpers, and close() kills every helper', async () => {
  const idle = pool({ idleMs: 100 });
  await read(idle);
  const [pid] = idle.pids();
  await eventually(() => (idle.size === 0 && !alive(pid!) ? true : undefined), {
    what: 'the idle helper stopped',
  });
  const p = pool();
  await Promise.all([read(p), read(p), read(p)]);
  const pids = p.pids();
  expect(pids.length).toBeGreaterThan(0);
  await p.close();
  expect(pids.filter(alive)).toEqual([]);
  await expect(read(p)).rejects.toMatchObject({ code: ErrorCode.Unavailable });
});

it('retires a helper that has been busy long enough, before the CPU limit could kill it mid-call', async () => {
  // Every request takes at least a millisecond of the helper's time: each helper serves one.
  const p = pool({ retireAfterBusyMs: 1 });
  expect(await read(p)).toMatchObject({ ok: true });
  const [first] = p.pids();
  await eventually(() => (alive(first!) ? undefined : true), {
    what: 'the used-up helper retired',
  });
  expect(await read(p)).toMatchObject({ ok: true, result: { content: 'hello\n' } });
  expect(p.pids()).not.toContain(first);
});
