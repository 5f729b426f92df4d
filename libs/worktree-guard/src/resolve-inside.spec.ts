import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, hasErrorCode } from '@toolgate/contracts';
import {
  assertWorktreeGitFile,
  isInside,
  parseGitDirPointer,
  resolveInside,
} from './resolve-inside';

let base: string;
let tree: string;
let outside: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'guard-')));
  tree = path.join(base, 'tree');
  outside = path.join(base, 'outside');
  await mkdir(path.join(tree, 'src', 'deep'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(tree, 'src', 'a.ts'), 'a');
  await writeFile(path.join(outside, 'secret'), 's');
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(candidate: string): Promise<string> {
  try {
    await resolveInside(tree, candidate);
  } catch (err) {
    expect(hasErrorCode(err, ErrorCode.PathOutsideScope)).toBe(true);
    return (err as { details: { reason: string } }).details.reason;
  }
  throw new Error(`expected ${candidate} to be refused`);
}

describe('resolveInside', () => {
  it('resolves existing and not-yet-existing paths inside the tree', async () => {
    expect(await resolveInside(tree, 'src/a.ts')).toBe(path.join(tree, 'src', 'a.ts'));
    expect(await resolveInside(tree, './src//deep/new/file.txt')).toBe(
      path.join(tree, 'src', 'deep', 'new', 'file.txt'),
    );
    expect(await resolveInside(tree, '.')).toBe(tree);
  });

  it('refuses absolute paths, parent segments and git metadata', async () => {
    expect(await refusal('/etc/passwd')).toBe('absolute');
    expect(await refusal(path.join(outside, 'secret'))).toBe('absolute');
    expect(await refusal('C:\\Windows')).toBe('absolute');
    expect(await refusal('../outside/secret')).toBe('parent-segment');
    expect(await refusal('src/../../outside')).toBe('parent-segment');
    expect(await refusal('src/..\\..\\outside')).toBe('parent-segment');
    expect(await refusal('.git/config')).toBe('git-metadata');
    expect(await refusal('vendor/.GIT')).toBe('git-metadata');
    expect(await refusal('')).toBe('empty');
    expect(await refusal('a\0b')).toBe('nul-byte');
  });

  it('allows git metadata when asked to', async () => {
    expect(await resolveInside(tree, '.git/x', { allowGitMetadata: true })).toBe(
      path.join(tree, '.git', 'x'),
    );
  });

  it('refuses symlinks planted by the agent that leave the tree', async () => {
    await symlink(outside, path.join(tree, 'src', 'out'));
    await symlink(path.join(outside, 'secret'), path.join(tree, 'leak'));
    await symlink('../../outside', path.join(tree, 'src', 'rel'));
    await symlink(path.join(outside, 'not-yet'), path.join(tree, 'dangling'));
    expect(await refusal('src/out/secret')).toBe('symlink-escape');
    expect(await refusal('src/out/new-file')).toBe('symlink-escape');
    expect(await refusal('leak')).toBe('symlink-escape');
    expect(await refusal('src/rel/secret')).toBe('symlink-escape');
    expect(await refusal('dangling')).toBe('dangling-symlink');
  });

  it('follows symlinks that stay inside the tree', async () => {
    await symlink('deep', path.join(tree, 'src', 'alias'));
    expect(await resolveInside(tree, 'src/alias/x.ts')).toBe(
      path.join(tree, 'src', 'deep', 'x.ts'),
    );
    // A target whose name starts with two dots is a name, not a way out.
    await mkdir(path.join(tree, '..cache'));
    await symlink('..cache', path.join(tree, 'cache'));
    expect(await resolveInside(tree, 'cache/x')).toBe(path.join(tree, '..cache', 'x'));
  });

  it('resolves a worktree root that is itself reached through a symlink', async () => {
    const link = path.join(base, 'tree-link');
    await symlink(tree, link);
    expect(await resolveInside(link, 'src/a.ts')).toBe(path.join(tree, 'src', 'a.ts'));
  });
});

describe('assertWorktreeGitFile', () => {
  it('accepts a .git file that points at the expected git dir and refuses anything else', async () => {
    const gitDir = path.join(base, 'repo', '.git', 'worktrees', 'tree');
    await mkdir(gitDir, { recursive: true });
    await writeFile(path.join(tree, '.git'), `gitdir: ${gitDir}\n`);
    await expect(assertWorktreeGitFile(tree, gitDir)).resolves.toBeUndefined();

    await writeFile(path.join(tree, '.git'), `gitdir: ${outside}\n`);
    await expect(assertWorktreeGitFile(tree, gitDir)).rejects.toMatchObject({
      code: 'path-outside-scope',
    });

    await rm(path.join(tree, '.git'));
    await symlink(gitDir, path.join(tree, '.git'));
    await expect(assertWorktreeGitFile(tree, gitDir)).rejects.toMatchObject({
      code: 'path-outside-scope',
    });

    await rm(path.join(tree, '.git'));
    await expect(assertWorktreeGitFile(tree, gitDir)).rejects.toMatchObject({
      code: 'path-outside-scope',
    });
  });

  it('parses gitdir pointers', () => {
    expect(parseGitDirPointer('gitdir: /a/b\n')).toBe('/a/b');
    expect(parseGitDirPointer('nothing')).toBeNull();
  });
});

describe('isInside', () => {
  it('is lexical containment', () => {
    expect(isInside('/a/b', '/a/b')).toBe(true);
    expect(isInside('/a/b', '/a/b/c')).toBe(true);
    expect(isInside('/a/b', '/a/bc')).toBe(false);
    expect(isInside('/a/b', '/a')).toBe(false);
    expect(isInside('/a/b', '/a/b/..c')).toBe(true);
    expect(isInside('/a/b', '/a/b/..')).toBe(false);
  });
});
