import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, hasErrorCode } from '@toolgate/contracts';
import {
  buildEnv,
  parseExecutionPolicy,
  policyForContext,
  resolveForRead,
  resolveForWrite,
  SAFE_ENV_VARS,
  type ExecutionPolicy,
} from './execution-policy';

/** Resolves to the thrown error, failing the test when nothing is thrown. */
async function failure(
  p: Promise<unknown>,
): Promise<{ code?: string; message: string; details?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('expected a rejection');
}

describe('parseExecutionPolicy', () => {
  it('fills safe defaults: the allowlist of SAFE_ENV_VARS and cwd as the only read and write scope', () => {
    const p = parseExecutionPolicy({ cwd: '/srv/work' });
    expect(p.env).toEqual({ mode: 'allowlist', names: [...SAFE_ENV_VARS], set: {} });
    expect(p.readPaths).toEqual(['/srv/work']);
    expect(p.writePaths).toEqual(['/srv/work']);
    expect(p.shell.timeoutMs).toBeGreaterThan(0);
    expect(Object.isFrozen(p)).toBe(true);
  });

  it('resolves relative scope roots against cwd and is idempotent', () => {
    const p = parseExecutionPolicy({
      cwd: '/srv/work',
      readPaths: ['.', '/etc/shared'],
      writePaths: ['src'],
    });
    expect(p.readPaths).toEqual(['/srv/work', '/etc/shared']);
    expect(p.writePaths).toEqual(['/srv/work/src']);
    expect(parseExecutionPolicy(p)).toEqual(p);
  });

  it('keeps secrets out of the default allowlist', () => {
    for (const name of SAFE_ENV_VARS)
      expect(name).not.toMatch(/TOKEN|SECRET|KEY|PASS|DATABASE|NATS|CRED/);
  });

  it('refuses an invalid policy with a config error naming the field', () => {
    let caught: unknown;
    try {
      parseExecutionPolicy({
        cwd: '/x',
        env: { mode: 'allowlist', names: ['NOT A NAME'] },
        maxOutputBytes: -1,
      });
    } catch (err) {
      caught = err;
    }
    expect(hasErrorCode(caught, ErrorCode.Config)).toBe(true);
    expect((caught as Error).message).toMatch(/env\.names\.0/);
    expect((caught as Error).message).toMatch(/maxOutputBytes/);
  });
});

describe('buildEnv', () => {
  const host = {
    PATH: '/usr/bin:/bin',
    HOME: '/home/agent',
    GITHUB_TOKEN: 'ghp_secret',
    DATABASE_URL: 'postgres://u:p@db/x',
    NATS_CREDS: '/etc/nats/creds',
  };

  it('passes only allowlisted names, and leaves absent ones absent', () => {
    const env = buildEnv(parseExecutionPolicy({ cwd: '/x' }), host);
    expect(env).toEqual({ PATH: '/usr/bin:/bin', HOME: '/home/agent' });
  });

  it('passes nothing from the host in inherit-none mode, only the fixed values', () => {
    const policy = parseExecutionPolicy({
      cwd: '/x',
      env: { mode: 'inherit-none', names: ['PATH'], set: { PAGER: 'cat' } },
    });
    expect(buildEnv(policy, host)).toEqual({ PAGER: 'cat' });
  });

  it('passes a secret only when the operator names it explicitly', () => {
    const policy = parseExecutionPolicy({ cwd: '/x', env: { names: ['PATH', 'GITHUB_TOKEN'] } });
    expect(buildEnv(policy, host)).toEqual({ PATH: '/usr/bin:/bin', GITHUB_TOKEN: 'ghp_secret' });
  });
});

describe('resolveForRead / resolveForWrite', () => {
  let base: string;
  let work: string;
  let outside: string;
  let policy: ExecutionPolicy;

  beforeEach(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-policy-')));
    work = path.join(base, 'work');
    outside = path.join(base, 'outside-secret-dir');
    await fs.mkdir(path.join(work, 'src'), { recursive: true });
    await fs.mkdir(outside);
    await fs.writeFile(path.join(work, 'a.txt'), 'a');
    await fs.writeFile(path.join(work, 'src', 'b.txt'), 'b');
    await fs.writeFile(path.join(outside, 'secret.txt'), 's');
    policy = parseExecutionPolicy({ cwd: work, writePaths: ['src'] });
  });

  afterEach(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  const outsideCode = async (p: Promise<unknown>) => (await failure(p)).code;

  it('resolves a relative path against the pinned cwd', async () => {
    await expect(resolveForRead(policy, work, 'a.txt')).resolves.toBe(path.join(work, 'a.txt'));
    await expect(resolveForRead(policy, work, './src/../a.txt')).resolves.toBe(
      path.join(work, 'a.txt'),
    );
  });

  it('accepts an absolute path inside the scope', async () => {
    await expect(resolveForRead(policy, work, path.join(work, 'src', 'b.txt'))).resolves.toBe(
      path.join(work, 'src', 'b.txt'),
    );
  });

  it('refuses .. that climbs out of the scope', async () => {
    expect(
      await outsideCode(resolveForRead(policy, work, '../outside-secret-dir/secret.txt')),
    ).toBe(ErrorCode.PathOutsideScope);
  });

  it('refuses an absolute path outside the scope', async () => {
    expect(await outsideCode(resolveForRead(policy, work, path.join(outside, 'secret.txt')))).toBe(
      ErrorCode.PathOutsideScope,
    );
    expect(await outsideCode(resolveForRead(policy, work, '/etc/passwd'))).toBe(
      ErrorCode.PathOutsideScope,
    );
  });

  it('refuses a sibling directory whose name starts with the scope root', async () => {
    await fs.mkdir(`${work}-evil`);
    expect(await outsideCode(resolveForRead(policy, work, `${work}-evil`))).toBe(
      ErrorCode.PathOutsideScope,
    );
  });

  it('follows a symlink pointing outside and refuses it, without leaking the target', async () => {
    await fs.symlink(path.join(outside, 'secret.txt'), path.join(work, 'innocent.txt'));
    const err = await failure(resolveForRead(policy, work, 'innocent.txt'));
    expect(err.code).toBe(ErrorCode.PathOutsideScope);
    expect(err.message).toBe('innocent.txt: outside the read scope');
    expect(JSON.stringify(err.details)).not.toContain('outside-secret-dir');
  });

  it('follows a symlink chain to its end', async () => {
    await fs.symlink(outside, path.join(work, 'hop2'));
    await fs.symlink(path.join(work, 'hop2'), path.join(work, 'hop1'));
    expect(await outsideCode(resolveForRead(policy, work, 'hop1/secret.txt'))).toBe(
      ErrorCode.PathOutsideScope,
    );
    // A chain that ends inside the scope is fine.
    await fs.symlink(path.join(work, 'src'), path.join(work, 'in2'));
    await fs.symlink('in2', path.join(work, 'in1'));
    await expect(resolveForRead(policy, work, 'in1/b.txt')).resolves.toBe(
      path.join(work, 'src', 'b.txt'),
    );
  });

  it('refuses a symlink loop', async () => {
    await fs.symlink(path.join(work, 'loop-b'), path.join(work, 'loop-a'));
    await fs.symlink(path.join(work, 'loop-a'), path.join(work, 'loop-b'));
    expect(await outsideCode(resolveForRead(policy, work, 'loop-a'))).toBe(
      ErrorCode.PathOutsideScope,
    );
  });

  it('answers outside-scope for a missing path outside, so existence outside is not revealed', async () => {
    expect(await outsideCode(resolveForRead(policy, work, path.join(outside, 'nope.txt')))).toBe(
      ErrorCode.PathOutsideScope,
    );
    await expect(resolveForRead(policy, work, 'missing.txt')).resolves.toBe(
      path.join(work, 'missing.txt'),
    );
  });

  it('checks writes against the write scope, not the read scope', async () => {
    await expect(resolveForWrite(policy, work, 'src/new.txt')).resolves.toBe(
      path.join(work, 'src', 'new.txt'),
    );
    expect(await outsideCode(resolveForWrite(policy, work, 'a.txt'))).toBe(
      ErrorCode.PathOutsideScope,
    );
    expect((await failure(resolveForWrite(policy, work, 'a.txt'))).message).toBe(
      'a.txt: outside the write scope',
    );
  });

  it('resolves a not-yet-existing write target through its nearest existing ancestor', async () => {
    await expect(resolveForWrite(policy, work, 'src/x/y/z.txt')).resolves.toBe(
      path.join(work, 'src', 'x', 'y', 'z.txt'),
    );
    // A symlinked parent pointing outside: the new directories would land outside.
    await fs.symlink(outside, path.join(work, 'src', 'out'));
    expect(await outsideCode(resolveForWrite(policy, work, 'src/out/new-dir/f.txt'))).toBe(
      ErrorCode.PathOutsideScope,
    );
  });

  it('follows a dangling symlink to where a write would land', async () => {
    await fs.symlink(path.join(outside, 'not-yet.txt'), path.join(work, 'src', 'dangling.txt'));
    expect(await outsideCode(resolveForWrite(policy, work, 'src/dangling.txt'))).toBe(
      ErrorCode.PathOutsideScope,
    );
    await fs.symlink(
      path.join(work, 'src', 'fresh.txt'),
      path.join(work, 'src', 'dangling-in.txt'),
    );
    await expect(resolveForWrite(policy, work, 'src/dangling-in.txt')).resolves.toBe(
      path.join(work, 'src', 'fresh.txt'),
    );
  });

  it('accepts paths under a scope root that is itself a symlink', async () => {
    const linkedRoot = path.join(base, 'linked-work');
    await fs.symlink(work, linkedRoot);
    const viaLink = parseExecutionPolicy({ cwd: linkedRoot });
    await expect(resolveForRead(viaLink, linkedRoot, 'a.txt')).resolves.toBe(
      path.join(work, 'a.txt'),
    );
  });
});

describe('policyForContext', () => {
  const base = parseExecutionPolicy({ cwd: '/srv/work', readPaths: ['/srv/work', '/srv/shared'] });

  it('keeps the base policy when the dispatch runs in the pinned cwd without isolation', () => {
    expect(policyForContext(base, { cwd: '/srv/work', isolation: 'none' })).toBe(base);
  });

  it('makes the worktree the cwd and the only read and write scope', () => {
    const p = policyForContext(base, { cwd: '/srv/wt/abc', isolation: { kind: 'worktree' } });
    expect(p.cwd).toBe('/srv/wt/abc');
    expect(p.readPaths).toEqual(['/srv/wt/abc']);
    expect(p.writePaths).toEqual(['/srv/wt/abc']);
  });

  it('drops every write scope under readonly isolation', () => {
    const p = policyForContext(base, { cwd: '/srv/work', isolation: 'readonly' });
    expect(p.writePaths).toEqual([]);
    expect(p.readPaths).toEqual(base.readPaths);
  });
});
