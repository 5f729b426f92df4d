import { isUtf8 } from 'node:buffer';
import { lstat, readdir, readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { isInside, parseGitDirPointer } from './resolve-inside';

/**
 * The file-system half of protected paths. The permission chain decides on the path a call names
 * (`@toolgate/permissions`: `chain.protectedPaths`); what that path reaches on disk — through a
 * symlink, or into a git directory that is not called `.git` (`--separate-git-dir`, a `.git` file's
 * `gitdir:`, a linked worktree's directory) — is checked here, just before the write, and listed
 * here for the sandbox to bind read-only.
 */

/** What this file needs of a protected-path set (`ProtectedPaths` from `@toolgate/permissions` fits). */
export interface ProtectedPathMatcher {
  match(path: string): { readonly pattern: string } | undefined;
  /**
   * The pattern `path` falls under or ends inside of (`.vscode` for `.vscode/settings.json`): what
   * a symlink there would make protected through the folder it points to.
   */
  matchBelow(path: string): { readonly pattern: string } | undefined;
}

/** Why a resolved path is protected: a pattern, or the git directory it lies in. */
export interface ProtectedOnDisk {
  readonly pattern: string;
}

const GIT_DIRECTORY = 'a git directory';

/**
 * Whether `dir` is a git directory as git itself recognises one: a `HEAD` file with `objects` and
 * `refs`, or with a `commondir` file (a linked worktree's private directory).
 */
export async function isGitDirectory(dir: string): Promise<boolean> {
  if (!(await exists(path.join(dir, 'HEAD')))) return false;
  if (await exists(path.join(dir, 'commondir'))) return true;
  return (await exists(path.join(dir, 'objects'))) && (await exists(path.join(dir, 'refs')));
}

/** The git directory `real` (absolute, resolved) lies in — itself or an ancestor — if any. */
export async function enclosingGitDirectory(real: string): Promise<string | undefined> {
  let dir = real;
  for (;;) {
    if (await isGitDirectory(dir)) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/**
 * What makes the resolved path `real` protected, if anything: a protected pattern matching it
 * (relative to `cwd` when it lies below it, so the directory the service runs in does not count),
 * or a git directory enclosing it under whatever name.
 */
async function protectedOnDisk(
  matcher: ProtectedPathMatcher,
  realCwd: string,
  real: string,
): Promise<ProtectedOnDisk | undefined> {
  const rel = isInside(realCwd, real) ? path.relative(realCwd, real) : real;
  const m = rel === '' ? undefined : matcher.match(rel);
  if (m !== undefined) return { pattern: m.pattern };
  if ((await enclosingGitDirectory(real)) !== undefined) return { pattern: GIT_DIRECTORY };
  return undefined;
}

/**
 * Refuses a write whose resolved target is protected when the chain did not see a protected path:
 * `requested` (what the call named, what the chain decided on) must itself be protected and resolve
 * to exactly `real`, without a symlink in between. So `docs/link/config` with `link -> ../.git`,
 * or `gd/config` where `gd` is a separate git directory, are refused with `denied`, while an
 * approved write to `.git/config` goes ahead. The message names the requested path and the
 * protected pattern, never the resolved path.
 */
export async function assertWriteNotProtected(
  matcher: ProtectedPathMatcher,
  o: { cwd: string; requested: string; real: string },
): Promise<void> {
  const realCwd = await realpath(o.cwd).catch(() => path.resolve(o.cwd));
  const onDisk = await protectedOnDisk(matcher, realCwd, o.real);
  if (onDisk === undefined) return;
  const lexical = path.resolve(realCwd, o.requested);
  const named = matcher.match(o.requested);
  if (named !== undefined && sameSpelling(lexical, o.real)) return;
  throw new ToolgateError(
    ErrorCode.Denied,
    `${o.requested}: reaches a protected path (${onDisk.pattern}) under another name; name it directly so the policy can decide`,
    { details: { path: o.requested, protected: onDisk.pattern } },
  );
}

/** The same path, allowing for the case a case-insensitive file system may report it in. */
function sameSpelling(a: string, b: string): boolean {
  return a === b || a.toLowerCase() === b.toLowerCase();
}

/** Options of {@link findProtectedPaths}. */
export interface FindProtectedPathsOptions {
  /** Most directory entries looked at over all roots; beyond it the answer is `truncated`. */
  readonly maxEntries?: number;
}

/** What {@link findProtectedPaths} found. */
export interface ProtectedPathsOnDisk {
  /** Absolute paths to bind read-only, sorted, without duplicates. */
  readonly paths: string[];
  /**
   * The walk stopped at `maxEntries`, or met a name that is not UTF-8 or a path over PATH_MAX:
   * paths further down were not looked at (fail closed).
   */
  readonly truncated: boolean;
}

/**
 * Every existing protected path a process running in `roots` (its writable directories) could
 * write, for a sandbox to bind read-only: entries under the roots that match a protected pattern
 * (not descended into), symlinks on the way to one (`.vscode`, `.github`: see
 * {@link ProtectedPathMatcher.matchBelow}), git directories under any name, the git directory a
 * `.git` file points at and its common directory, and the `.git` of a repository enclosing a root.
 * Symlinks are listed, not followed. Paths that do not exist yet cannot be bound; the chain asks
 * before a call names one.
 */
export async function findProtectedPaths(
  matcher: ProtectedPathMatcher,
  roots: readonly string[],
  options: FindProtectedPathsOptions = {},
): Promise<ProtectedPathsOnDisk> {
  const found = new Set<string>();
  const budget = { left: options.maxEntries ?? 200_000, unreached: false };
  let truncated = false;
  for (const root of roots) {
    const realRoot = await realpath(root).catch(() => undefined);
    if (realRoot === undefined) continue;
    await addEnclosingRepository(realRoot, found);
    if (!(await walk(matcher, realRoot, realRoot, found, budget))) truncated = true;
    if (budget.unreached) truncated = true;
  }
  return { paths: [...found].sort(), truncated };
}

/** The `.git` (and where it points) of the repository a root lies in, or the git directory it is. */
async function addEnclosingRepository(realRoot: string, found: Set<string>): Promise<void> {
  let dir = realRoot;
  for (;;) {
    if (await isGitDirectory(dir)) found.add(dir);
    const dotGit = path.join(dir, '.git');
    if (await exists(dotGit)) {
      found.add(dotGit);
      await addGitFileTarget(dotGit, dir, found);
      return;
    }
    const parent = path.dirname(dir);
    if (parent === dir) return;
    dir = parent;
  }
}

/** When `dotGit` is a `.git` file, the git directory it names and that one's common directory. */
async function addGitFileTarget(dotGit: string, dir: string, found: Set<string>): Promise<void> {
  let text: string;
  try {
    if (!(await lstat(dotGit)).isFile()) return;
    text = await readFile(dotGit, 'utf8');
  } catch {
    return;
  }
  const pointer = parseGitDirPointer(text);
  if (pointer === null) return;
  const gitDir = await realpath(path.resolve(dir, pointer)).catch(() => undefined);
  if (gitDir === undefined) return;
  found.add(gitDir);
  try {
    const common = (await readFile(path.join(gitDir, 'commondir'), 'utf8')).trim();
    const commonDir = await realpath(path.resolve(gitDir, common)).catch(() => undefined);
    if (commonDir !== undefined) found.add(commonDir);
  } catch {
    // No commondir: not a linked worktree.
  }
}

/**
 * Walks `dir` below `root`; false when the entry budget ran out. What it cannot look at (a folder
 * it may not read, a path over PATH_MAX, a name that is not UTF-8) sets `budget.unreached`, and the
 * walk goes on with the rest, so what it can reach is still found.
 */
async function walk(
  matcher: ProtectedPathMatcher,
  root: string,
  dir: string,
  found: Set<string>,
  budget: { left: number; unreached: boolean },
): Promise<boolean> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    // Gone since it was listed (or no folder now): nothing to find. Anything else — a folder a run
    // made unreadable (chmod: a service that is not root cannot look), a path over PATH_MAX (a run
    // can nest folders deeper by renaming) — is not looked at: fail closed.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') budget.unreached = true;
    return true;
  }
  // A name that is not UTF-8 reads with U+FFFD in it and names nothing on disk (or, worse, another
  // entry that is spelled so): what is below it cannot be looked at — fail closed.
  if (entries.some((e) => e.name.includes('\uFFFD'))) {
    const raw = await readdir(dir, { encoding: 'buffer' }).catch(() => []);
    if (raw.some((name) => !isUtf8(name))) budget.unreached = true;
  }
  const names = new Set(entries.map((e) => e.name));
  if (
    dir !== root &&
    names.has('HEAD') &&
    (names.has('commondir') || (names.has('objects') && names.has('refs')))
  ) {
    found.add(dir);
    return true;
  }
  for (const e of entries) {
    if (--budget.left < 0) return false;
    const full = path.join(dir, e.name);
    const rel = path.relative(root, full);
    if (matcher.match(rel) !== undefined) {
      found.add(full);
      if (e.name.toLowerCase() === '.git') await addGitFileTarget(full, dir, found);
      continue;
    }
    // A link on the way to a protected path (`.vscode` → a folder holding `settings.json`) makes
    // one of what it points to: listed as a protected path itself (the walk does not follow it).
    if (e.isSymbolicLink() && matcher.matchBelow(rel) !== undefined) {
      found.add(full);
      continue;
    }
    if (e.isDirectory() && !(await walk(matcher, root, full, found, budget))) return false;
  }
  return true;
}

async function exists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch {
    return false;
  }
}
