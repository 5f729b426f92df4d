import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, hasErrorCode } from '@toolgate/contracts';
import {
  assertWriteNotProtected,
  enclosingGitDirectory,
  findProtectedPaths,
  isGitDirectory,
  type ProtectedPathMatcher,
} from './index';

/**
 * A stand-in for `chain.protectedPaths` (which lives in @toolgate/permissions, a library this one
 * does not depend on): `.git` and `.env*` components, any case.
 */
const matcher: ProtectedPathMatcher = {
  match(p) {
    for (const c of p.split(/[\\/]+/)) {
      const name = c.toLowerCase();
      if (name === '.git') return { pattern: '.git' };
      if (name.startsWith('.env')) return { pattern: '.env*' };
    }
    return undefined;
  },
  // And `.github/workflows`: a link named `.github` is on the way to it.
  matchBelow(p) {
    return (
      this.match(p) ?? (/(^|\/)\.github$/i.test(p) ? { pattern: '.github/workflows' } : undefined)
    );
  },
};

let base: string;
let repo: string;

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    stdio: 'pipe',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' },
  });

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'protected-')));
  repo = path.join(base, 'repo');
  await mkdir(path.join(repo, 'src'), { recursive: true });
  git(repo, 'init', '-q');
  await writeFile(path.join(repo, 'src', 'a.ts'), 'a');
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(requested: string, real: string, cwd = repo): Promise<unknown> {
  try {
    await assertWriteNotProtected(matcher, { cwd, requested, real });
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('git directories on disk', () => {
  it('recognises a git directory under any name, and what lies inside one', async () => {
    expect(await isGitDirectory(path.join(repo, '.git'))).toBe(true);
    expect(await isGitDirectory(repo)).toBe(false);
    const separate = path.join(base, 'elsewhere');
    git(base, 'init', '-q', `--separate-git-dir=${separate}`, 'second');
    expect(await isGitDirectory(separate)).toBe(true);
    expect(await enclosingGitDirectory(path.join(separate, 'hooks', 'pre-commit'))).toBe(separate);
    expect(await enclosingGitDirectory(path.join(repo, 'src', 'a.ts'))).toBeUndefined();
  });
});

describe('assertWriteNotProtected', () => {
  it('lets ordinary writes and writes the chain saw as protected through', async () => {
    expect(await refusal('src/a.ts', path.join(repo, 'src', 'a.ts'))).toBeUndefined();
    expect(await refusal('src/new/b.ts', path.join(repo, 'src', 'new', 'b.ts'))).toBeUndefined();
    // The chain asked about `.git/config` and somebody approved: same path on disk, no surprise.
    expect(await refusal('.git/config', path.join(repo, '.git', 'config'))).toBeUndefined();
  });

  it('refuses a symlink into .git, naming the requested path only', async () => {
    await mkdir(path.join(repo, 'docs'));
    await symlink('../.git', path.join(repo, 'docs', 'link'));
    const err = await refusal('docs/link/config', path.join(repo, '.git', 'config'));
    expect(hasErrorCode(err, ErrorCode.Denied)).toBe(true);
    expect((err as Error).message).toContain('docs/link/config');
    expect((err as Error).message).not.toContain(base);
  });

  it('refuses an approved protected name that a symlink points at another protected path', async () => {
    // `.env` was approved as `.env`, but it is a link into the repository's git directory.
    await symlink('.git/hooks/pre-commit', path.join(repo, '.env'));
    const err = await refusal('.env', path.join(repo, '.git', 'hooks', 'pre-commit'));
    expect(hasErrorCode(err, ErrorCode.Denied)).toBe(true);
  });

  it('refuses a git directory that is not called .git (a .git file points at it)', async () => {
    git(repo, 'init', '-q', `--separate-git-dir=${path.join(repo, 'vendor-gd')}`, 'vendor');
    const err = await refusal('vendor-gd/config', path.join(repo, 'vendor-gd', 'config'));
    expect(hasErrorCode(err, ErrorCode.Denied)).toBe(true);
    expect((err as { details: unknown }).details).toEqual({
      path: 'vendor-gd/config',
      protected: 'a git directory',
    });
  });

  it('judges paths below the working directory relative to it', async () => {
    // The service may itself run inside a directory with a protected name.
    const cwd = path.join(base, '.env-work');
    await mkdir(cwd);
    expect(await refusal('out.txt', path.join(cwd, 'out.txt'), cwd)).toBeUndefined();
  });
});

describe('findProtectedPaths (what the sandbox binds read-only)', () => {
  it('lists .git directories and files, where .git files point, env files and git directories by any name', async () => {
    await writeFile(path.join(repo, '.env'), 'TOKEN=x');
    await mkdir(path.join(repo, 'node_modules', 'dep', '.git'), { recursive: true });
    git(repo, 'init', '-q', `--separate-git-dir=${path.join(repo, 'gd')}`, 'nested');
    await symlink('.git', path.join(repo, 'src', '.ENV.local'));
    const found = await findProtectedPaths(matcher, [repo]);
    expect(found.truncated).toBe(false);
    expect(found.paths).toEqual(
      [
        path.join(repo, '.env'),
        path.join(repo, '.git'),
        path.join(repo, 'gd'),
        path.join(repo, 'nested', '.git'),
        path.join(repo, 'node_modules', 'dep', '.git'),
        path.join(repo, 'src', '.ENV.local'),
      ].sort(),
    );
    expect(found.paths).not.toContain(path.join(repo, 'src', 'a.ts'));
  });

  it('lists a symlink on the way to a protected path, not a folder or another link', async () => {
    await mkdir(path.join(repo, 'gh', 'workflows'), { recursive: true });
    await symlink('gh', path.join(repo, 'src', '.github'));
    await symlink('gh', path.join(repo, 'docs-link'));
    await mkdir(path.join(repo, '.github'));
    const found = await findProtectedPaths(matcher, [repo]);
    expect(found.paths).toContain(path.join(repo, 'src', '.github'));
    expect(found.paths).not.toContain(path.join(repo, 'docs-link'));
    expect(found.paths).not.toContain(path.join(repo, '.github'));
  });

  it('follows a linked worktree to its private and common git directories', async () => {
    git(
      repo,
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@x',
      'commit',
      '-q',
      '--allow-empty',
      '-m',
      'init',
    );
    const wt = path.join(base, 'wt');
    git(repo, 'worktree', 'add', '-q', wt);
    const found = await findProtectedPaths(matcher, [wt]);
    expect(found.paths).toEqual(
      [
        path.join(repo, '.git'),
        path.join(repo, '.git', 'worktrees', 'wt'),
        path.join(wt, '.git'),
      ].sort(),
    );
  });

  it('lists the .git of a repository that encloses a root', async () => {
    const found = await findProtectedPaths(matcher, [path.join(repo, 'src')]);
    expect(found.paths).toEqual([path.join(repo, '.git')]);
  });

  it('says when it stopped early', async () => {
    for (let i = 0; i < 20; i++) await writeFile(path.join(repo, 'src', `f${i}`), '');
    expect((await findProtectedPaths(matcher, [repo], { maxEntries: 5 })).truncated).toBe(true);
  });
});
