import { lstat, readFile, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';

/** Why a path was refused; carried in `details.reason` of the `path-outside-scope` error. */
export type RefusalReason =
  | 'empty'
  | 'nul-byte'
  | 'absolute'
  | 'parent-segment'
  | 'git-metadata'
  | 'symlink-escape'
  | 'dangling-symlink'
  | 'root-not-absolute'
  | 'git-file';

/** Options of {@link resolveInside}. */
export interface ResolveInsideOptions {
  /**
   * Allow a `.git` segment anywhere in the path. Off by default: a tool that writes a `.git` file
   * or directory inside a worktree can point git at another repository, so the executor refuses it.
   */
  allowGitMetadata?: boolean;
}

function refuse(candidate: string, reason: RefusalReason, message: string): ToolgateError {
  return new ToolgateError(ErrorCode.PathOutsideScope, message, {
    details: { path: candidate, reason },
  });
}

/**
 * Whether `p` is `root` or below it. Both must be absolute and normalised; purely lexical. A name
 * that merely starts with two dots (`..cache`) is inside; only a `..` segment climbs out.
 */
export function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * Resolves a tool-supplied relative path inside a worktree, through symlinks, and returns the real
 * absolute path it designates. Throws a `path-outside-scope` {@link ToolgateError} for an absolute
 * path, any `..` segment, a `.git` segment (unless allowed), a symlink whose target leaves the
 * tree, or a dangling symlink (its target cannot be checked, and writing through it would create
 * the target wherever it points).
 *
 * The walk checks every existing component with `lstat`, so a symlink planted by the agent halfway
 * down the path is caught; components that do not exist yet cannot be symlinks and are appended
 * as they are. The check is a point-in-time one: a process that keeps racing symlinks into the tree
 * is contained by the executor's sandbox, not by this function.
 */
export async function resolveInside(
  worktreeRoot: string,
  candidate: string,
  options: ResolveInsideOptions = {},
): Promise<string> {
  if (!path.isAbsolute(worktreeRoot)) {
    throw refuse(
      candidate,
      'root-not-absolute',
      `worktree root must be absolute, got ${worktreeRoot}`,
    );
  }
  if (typeof candidate !== 'string' || candidate.length === 0) {
    throw refuse(String(candidate), 'empty', 'path must be a non-empty string');
  }
  if (candidate.includes('\0')) throw refuse(candidate, 'nul-byte', 'path contains a NUL byte');
  // Reject both POSIX and Windows-looking absolute forms: a tool never needs them inside a tree.
  if (path.isAbsolute(candidate) || path.win32.isAbsolute(candidate) || candidate.startsWith('~')) {
    throw refuse(candidate, 'absolute', `absolute path ${candidate} is outside the worktree`);
  }
  const segments = candidate.split(/[\\/]+/).filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) {
    throw refuse(candidate, 'parent-segment', `path ${candidate} uses '..'`);
  }
  if (!options.allowGitMetadata && segments.some((s) => s.toLowerCase() === '.git')) {
    throw refuse(candidate, 'git-metadata', `path ${candidate} touches git metadata`);
  }

  const realRoot = await realpath(worktreeRoot);
  let current = realRoot;
  for (let i = 0; i < segments.length; i++) {
    const next = path.join(current, segments[i] as string);
    let stats;
    try {
      stats = await lstat(next);
    } catch (err) {
      if (isNotFound(err)) {
        // Nothing below a missing component exists, so nothing below it can be a symlink.
        return path.join(current, ...segments.slice(i));
      }
      throw err;
    }
    if (stats.isSymbolicLink()) {
      let target: string;
      try {
        target = await realpath(next);
      } catch (err) {
        if (isNotFound(err)) {
          const link = await readlink(next).catch(() => '?');
          throw refuse(
            candidate,
            'dangling-symlink',
            `path ${candidate} goes through a dangling symlink (-> ${link})`,
          );
        }
        throw err;
      }
      if (!isInside(realRoot, target)) {
        throw refuse(
          candidate,
          'symlink-escape',
          `path ${candidate} leaves the worktree through a symlink`,
        );
      }
      current = target;
    } else {
      current = next;
    }
  }
  return current;
}

/**
 * Checks that the `.git` entry at the top of a linked worktree is a regular file whose `gitdir:`
 * line points at `expectedGitDir` (the repository's `.git/worktrees/<name>`). An agent that
 * replaces it with a directory, a symlink, or a pointer to another repository would otherwise
 * make the service run git against a repository the host never offered. Throws a
 * `path-outside-scope` error when it does not.
 */
export async function assertWorktreeGitFile(
  worktreeRoot: string,
  expectedGitDir: string,
): Promise<void> {
  const gitFile = path.join(worktreeRoot, '.git');
  let stats;
  try {
    stats = await lstat(gitFile);
  } catch (err) {
    if (isNotFound(err)) throw refuse('.git', 'git-file', 'the worktree has no .git file');
    throw err;
  }
  if (!stats.isFile()) {
    throw refuse('.git', 'git-file', 'the worktree .git entry is not a regular file');
  }
  const text = await readFile(gitFile, 'utf8');
  const pointer = parseGitDirPointer(text);
  if (pointer === null)
    throw refuse('.git', 'git-file', 'the worktree .git file has no gitdir line');
  const target = path.resolve(worktreeRoot, pointer);
  const [realTarget, realExpected] = await Promise.all([
    realpath(target).catch(() => null),
    realpath(expectedGitDir).catch(() => null),
  ]);
  if (realTarget === null || realExpected === null || realTarget !== realExpected) {
    throw refuse('.git', 'git-file', 'the worktree .git file points at another git directory');
  }
}

/** The path of a `.git` file's `gitdir: <path>` line, or null when there is none. */
export function parseGitDirPointer(text: string): string | null {
  const match = /^gitdir: (.+?)\r?\n?$/m.exec(text);
  return match?.[1] ?? null;
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
