import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { simpleGit, type SimpleGit } from 'simple-git';
import { ConfigError } from '@toolgate/contracts';
import { parseGitDirPointer } from '@toolgate/worktree-guard';
import { removeTreeFiles } from './tree-files';

/**
 * Configuration every git the service runs gets, over whatever the repository's own says: no
 * fsmonitor daemon (it would outlive a removed tree, and it is a command the config names) and no
 * hooks (`worktree add` runs `post-checkout`): the service runs git outside every sandbox, on a
 * repository whose working copy tools write to, so nothing a repository's files name may run in
 * it. No prompts either (GIT_TERMINAL_PROMPT below).
 */
const BASE_CONFIG = ['core.fsmonitor=false', 'core.hooksPath=/dev/null'];

/** A simple-git instance rooted at `dir`, optionally with extra environment (e.g. `GIT_INDEX_FILE`). */
export function gitAt(dir: string, env: Record<string, string> = {}): SimpleGit {
  const git = simpleGit({
    baseDir: dir,
    config: BASE_CONFIG,
    maxConcurrentProcesses: 4,
    // simple-git refuses any core.fsmonitor or core.hooksPath setting; ours only switch them off.
    unsafe: { allowUnsafeFsMonitor: true, allowUnsafeHooksPath: true },
  });
  return git.env({ ...baseEnv(), GIT_TERMINAL_PROMPT: '0', ...env });
}

/** Variables git may see from the service's environment. */
const PASSED_ENV = [
  'PATH',
  'HOME',
  'USER',
  'LANG',
  'LC_ALL',
  'LC_CTYPE',
  'TMPDIR',
  'TZ',
  'XDG_CONFIG_HOME',
];

/**
 * An allowlist, not the whole environment: an inherited `GIT_DIR`, `GIT_INDEX_FILE` or
 * `GIT_WORK_TREE` would point every command at another repository, and editor or askpass
 * variables have no business in a non-interactive service.
 */
function baseEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of PASSED_ENV) {
    const value = process.env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** A host repository as the lifecycle addresses it. */
export interface RepositoryLocation {
  /** The real path of the working tree's top level. */
  toplevel: string;
  /** The real path of the common git directory, shared by all its worktrees. */
  commonDir: string;
}

/**
 * Locates the repository containing `repoPath`. A path that does not exist, is not inside a git
 * working tree, or is a bare repository is a {@link ConfigError}: the host offered nothing to
 * branch a worktree from.
 */
export async function locateRepository(repoPath: string): Promise<RepositoryLocation> {
  if (!path.isAbsolute(repoPath)) {
    throw new ConfigError(`repository path must be absolute, got ${JSON.stringify(repoPath)}`, {
      details: { repo: repoPath },
    });
  }
  const isDir = await stat(repoPath).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) {
    throw new ConfigError(`repository path ${repoPath} is not a directory`, {
      details: { repo: repoPath },
    });
  }
  let out: string;
  try {
    out = await gitAt(repoPath).raw([
      'rev-parse',
      '--path-format=absolute',
      '--is-bare-repository',
      '--show-toplevel',
      '--git-common-dir',
    ]);
  } catch (err) {
    throw new ConfigError(`${repoPath} is not inside a git working tree`, {
      details: { repo: repoPath },
      cause: err,
    });
  }
  const [bare, toplevel, commonDir] = out.trim().split('\n');
  if (bare !== 'false' || !toplevel || !commonDir) {
    throw new ConfigError(`${repoPath} is not a non-bare git working tree`, {
      details: { repo: repoPath },
    });
  }
  return { toplevel: await realpath(toplevel), commonDir: await realpath(commonDir) };
}

/**
 * Resolves `ref` to the commit it names. An unknown ref, or one that does not name a commit, is a
 * {@link ConfigError}. Refs that look like options are refused before git sees them.
 */
export async function resolveCommit(repo: string, ref: string): Promise<string> {
  if (ref.length === 0 || ref.length > 256 || ref.startsWith('-') || /[\0\s]/.test(ref)) {
    throw new ConfigError(`invalid ref ${JSON.stringify(ref)}`, { details: { ref } });
  }
  try {
    const out = await gitAt(repo).raw([
      'rev-parse',
      '--verify',
      '--quiet',
      '--end-of-options',
      `${ref}^{commit}`,
    ]);
    const commit = out.trim();
    if (/^[0-9a-f]{40,64}$/.test(commit)) return commit;
  } catch {
    // Falls through to the typed error below.
  }
  throw new ConfigError(`unknown ref ${JSON.stringify(ref)} in ${repo}`, {
    details: { ref, repo },
  });
}

/**
 * Creates a linked worktree at `treePath` on a new branch at `commit`. `-B` (not `-b`) because a
 * branch of the same name can be left over by a crash between `worktree add` and recording it;
 * the name is the service's own, so resetting it loses nothing.
 */
export async function addWorktree(
  repo: string,
  treePath: string,
  branch: string,
  commit: string,
): Promise<void> {
  await gitAt(repo).raw(['worktree', 'add', '--quiet', '-B', branch, treePath, commit]);
}

/**
 * The tree's own git directory (`<commonDir>/worktrees/<name>`), as a real path, read from the
 * `.git` file `git worktree add` just wrote (no git process: this is on every acquire's path).
 */
export async function worktreeGitDir(treePath: string): Promise<string> {
  const pointer = parseGitDirPointer(await readFile(path.join(treePath, '.git'), 'utf8'));
  if (pointer === null) throw new Error(`${treePath}/.git has no gitdir line`);
  return realpath(path.resolve(treePath, pointer));
}

/**
 * Removes a linked worktree and its branch. The tree's files go first, following no link
 * ({@link removeTreeFiles}: a call of its agent may still be renaming things there, and a folder
 * swapped for a link to a host folder must not lead a removal there — `git worktree remove` and
 * a recursive `rm` both walk by name); then git drops its metadata of the tree, gone by then, and
 * the branch. Tolerates a tree that is already gone (a crash during a previous removal, or someone
 * deleting the directory).
 */
export async function removeWorktree(
  repo: string,
  treePath: string,
  branch: string,
  /** Where the removal moves what is nested too deep to remove in place (the service's own). */
  spill: string,
): Promise<void> {
  await removeTreeFiles(treePath, spill);
  const git = gitAt(repo);
  try {
    // Twice --force: also drops the metadata of a tree that was locked.
    await git.raw(['worktree', 'remove', '--force', '--force', treePath]);
  } catch {
    await git.raw(['worktree', 'prune']);
  }
  try {
    await git.raw(['branch', '-D', '--end-of-options', branch]);
  } catch {
    // The branch is already gone: nothing left to remove.
  }
}

/** Drops the repository's metadata of worktrees whose directories are gone. */
export async function pruneWorktrees(repo: string): Promise<void> {
  await gitAt(repo).raw(['worktree', 'prune']);
}
