import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import type { ProcessResult, Sandbox, SandboxRequest } from '@toolgate/sandbox';
import { findProtectedPaths, isInside, type ProtectedPathMatcher } from '@toolgate/worktree-guard';

/** The protected paths in a directory before a run, and the symlinks among them. */
export interface ProtectedState {
  /** Absolute, as {@link findProtectedPaths} lists them (symlinks listed, not followed). */
  readonly paths: string[];
  /**
   * The symlinks in the directory a protected path is or leads through (`.vscode` → `l` → `e`:
   * both), with their link text: a run that re-points one has it put back.
   */
  readonly links: ReadonlyMap<string, string>;
  /**
   * Where a protected link in the directory leads that does not exist (`.env` → `missing`): a run
   * that creates it has chosen what the protected path holds, so it is removed.
   */
  readonly absent: readonly string[];
}

/** What a run changed among the protected paths of its directory, relative to it. */
export interface ProtectedChanges {
  /** Protected paths that exist now and did not before the run. */
  readonly created: string[];
  /** Protected symlinks that were removed or replaced, with the link text to put back. */
  readonly replacedLinks: ReadonlyMap<string, string>;
  /**
   * The walk did not reach everything (over its entry budget, or a name or path it cannot
   * address): what lies beyond it was not checked, and the call fails (fail closed).
   */
  readonly incomplete: boolean;
}

/**
 * The files that make a folder a git directory (`isGitDirectory`: `HEAD` with `objects` and
 * `refs`, or with `commondir`): removing the ones a run created at the top of its directory
 * undoes its turning that directory into one.
 */
const GIT_DIRECTORY_MARKERS = ['HEAD', 'commondir'];

/**
 * The existing protected paths (the call's policy: `.git`, `.toolgate`, `.env*`, … and git
 * directories under any name) in a call's directory, for the sandbox to bind read-only, with the
 * link text of each that is a symlink. A directory too large to search completely refuses the
 * call: a protected path the walk did not reach would be writable.
 */
export async function protectedState(
  matcher: ProtectedPathMatcher,
  cwd: string,
): Promise<ProtectedState> {
  const root = await realDirectory(cwd);
  const found = await findProtectedPaths(matcher, [root]);
  if (found.truncated) {
    throw new ToolgateError(
      ErrorCode.Config,
      'the working directory is too large to find every protected path in it (over its entry limit, or holding names or paths the check cannot reach); the sandbox will not run there',
    );
  }
  const links = new Map<string, string>();
  const absent: string[] = [];
  // What the sandbox holds: the protected paths, every link on the way from one (bound like them:
  // what it reaches read-only, the folder holding it onto itself, so no folder on the chain can be
  // swapped for a link), and the folder a dangling one's missing target would appear in (read-only
  // for the run; at the top of the directory, the check after the run removes what appears).
  const held = new Set(found.paths);
  for (const p of found.paths) {
    if (!isInside(root, p) || p === root) continue;
    // Only a link has a chain: the walk reached every path it lists through real folders.
    if (!(await fs.lstat(p).catch(() => undefined))?.isSymbolicLink()) continue;
    const chain = await linkChain(p);
    for (const [link, text] of chain.links) {
      if (!isInside(root, link)) continue;
      links.set(link, text);
      held.add(link);
    }
    if (chain.missing !== undefined && isInside(root, chain.missing)) {
      absent.push(chain.missing);
      if (path.dirname(chain.missing) !== root) held.add(path.dirname(chain.missing));
    }
  }
  return { paths: [...held].sort(), links, absent };
}

/**
 * How the kernel would resolve `link` (absolute, in a real folder), component by component: every
 * symlink met on the way with its text, and the first path that does not exist, if resolution ends
 * at one. A
 * link's text is followed as the kernel follows it — `l/..` goes up from where `l` leads, not back
 * to where `l` is. At most 40 links, as the kernel allows (more: resolution fails, nothing missing).
 */
async function linkChain(
  link: string,
): Promise<{ links: Map<string, string>; missing: string | undefined }> {
  const links = new Map<string, string>();
  const components = (text: string) => text.split('/').filter((c) => c !== '' && c !== '.');
  // Always a real path: no link in it (the folder `link` is in, to begin with).
  let resolved = path.dirname(link);
  let rest = [path.basename(link)];
  for (let hops = 0; rest.length > 0;) {
    const name = rest.shift()!;
    if (name === '..') {
      resolved = path.dirname(resolved);
      continue;
    }
    const candidate = path.join(resolved, name);
    const stat = await fs.lstat(candidate).catch(() => undefined);
    if (!stat) return { links, missing: candidate };
    if (!stat.isSymbolicLink()) {
      resolved = candidate;
      continue;
    }
    if (++hops > 40) return { links, missing: undefined };
    const text = await fs.readlink(candidate);
    links.set(candidate, text);
    if (path.isAbsolute(text)) resolved = '/';
    rest = [...components(text), ...rest];
  }
  return { links, missing: undefined };
}

/**
 * What a run changed among the protected paths of `cwd`, from the state before it: paths created
 * (a run cannot write into an existing one, which is bound read-only, but it can create one that
 * did not exist — `.github/workflows` where there was no `.github`, a `.git` in a new folder, an
 * archive unpacked with `--transform`), and protected symlinks removed or pointed elsewhere (a
 * mount cannot be put on a symlink).
 */
export async function protectedChanges(
  matcher: ProtectedPathMatcher,
  cwd: string,
  before: ProtectedState,
): Promise<ProtectedChanges> {
  const root = await realDirectory(cwd);
  const after = await findProtectedPaths(matcher, [root]);
  const known = new Set(before.paths);
  const created = after.paths
    .filter((p) => isInside(root, p) && p !== root && !known.has(p))
    .map((p) => path.relative(root, p));
  // What a protected link led to that did not exist, made by the run.
  for (const missing of before.absent) {
    const rel = path.relative(root, missing);
    if (!created.includes(rel) && (await fs.lstat(missing).catch(() => undefined))) {
      created.push(rel);
    }
  }
  // The directory itself made a git directory (a red team's: `HEAD`, `objects`, `refs` and a
  // `config` with `core.fsmonitor` at its top, which git on the host then ran).
  if (after.paths.includes(root) && !known.has(root)) {
    for (const marker of GIT_DIRECTORY_MARKERS) {
      if (await fs.lstat(path.join(root, marker)).catch(() => undefined)) created.push(marker);
    }
  }
  const replacedLinks = new Map<string, string>();
  for (const [link, target] of before.links) {
    const now = await fs.readlink(link).catch(() => undefined);
    if (now !== target) replacedLinks.set(path.relative(root, link), target);
  }
  return { created, replacedLinks, incomplete: after.truncated };
}

/**
 * Puts protected paths back as they were before a run, inside the sandbox (the paths are the
 * tool's to name: a folder on the way swapped for a symlink must not lead the removal anywhere
 * but the call's directory): created ones are removed, replaced symlinks made again. Fixed script;
 * the paths are arguments.
 */
const RESTORE_SCRIPT =
  'while [ $# -gt 0 ]; do case $1 in ' +
  // A folder the run made read-only is opened up first (a link is never chmod-ed: that would
  // change what it points to).
  'rm) d=$(dirname -- "$2"); [ -L "$d" ] || chmod u+rwx -- "$d" 2>/dev/null; ' +
  '[ -L "$2" ] || chmod -R u+rwx -- "$2" 2>/dev/null; rm -rf -- "$2"; shift 2;; ' +
  'ln) rm -rf -- "$2"; mkdir -p -- "$(dirname -- "$2")" && ln -s -- "$3" "$2"; shift 3;; ' +
  '*) exit 2;; esac; done';

/**
 * Runs `request` in the sandbox so that protected paths hold on the effect: the existing ones (and
 * every folder on the way to one) are bound read-only by the sandbox; what the mounts cannot hold
 * — a protected path that did not exist before the run, a protected symlink — is checked right
 * after the run and put back, and the call fails with `denied` naming the paths (relative to its
 * directory). The window: between the run creating such a path and the check (the run's length),
 * a program on the host could see it; the run itself and everything it started are gone by then.
 */
export async function runHoldingProtectedPaths(
  sandbox: Sandbox,
  matcher: ProtectedPathMatcher,
  request: Omit<SandboxRequest, 'protectedPaths'>,
): Promise<ProcessResult> {
  // Nothing writable holds every protected path already: no walk, no binds, no check after.
  if (request.writable === false && !request.writablePaths?.length) {
    return sandbox.run({ ...request, protectedPaths: [] });
  }
  const before = await protectedState(matcher, request.cwd);
  const result = await sandbox.run({ ...request, protectedPaths: before.paths });
  await holdProtectedPaths(sandbox, matcher, request.cwd, before, result);
  return result;
}

/**
 * After a run in `cwd` (the sandbox's or a container's): puts back what it changed among the
 * protected paths since `before` ({@link protectedChanges}) and throws `denied` naming them, with
 * the run's exit code and output tails; returns when nothing changed. The restore runs in
 * `sandbox`; without one, nothing is touched and the error says the paths were not put back.
 */
export async function holdProtectedPaths(
  sandbox: Sandbox | null,
  matcher: ProtectedPathMatcher,
  cwd: string,
  before: ProtectedState,
  result: Pick<ProcessResult, 'exitCode' | 'stdout' | 'stderr'>,
): Promise<void> {
  const changes = await protectedChanges(matcher, cwd, before);
  const paths = [...changes.created, ...changes.replacedLinks.keys()];
  if (paths.length === 0 && !changes.incomplete) return;
  if (sandbox && paths.length > 0) {
    await restoreProtected(sandbox, matcher, cwd, changes);
    // Checked again: the restore must not have made anything (a folder on the way swapped for a
    // link would lead it elsewhere), and nothing may be left.
    const left = await protectedChanges(matcher, cwd, before);
    const still = [...left.created, ...left.replacedLinks.keys()];
    if (still.length > 0) {
      throw new ToolgateError(
        ErrorCode.Internal,
        'the protected paths a command changed could not all be put back',
        { details: { paths: still.slice(0, 100) } },
      );
    }
  }
  if (changes.incomplete) {
    throw new ToolgateError(
      ErrorCode.Config,
      `the command left the working directory too large to check its protected paths (over its entry limit, or holding names or paths the check cannot reach)${paths.length ? `; those it found were ${sandbox ? 'put back' : 'not put back'}: ${paths.slice(0, 10).join(', ')}` : ''}`,
      { details: { paths: paths.slice(0, 100), restored: sandbox !== null && paths.length > 0 } },
    );
  }
  const named = `${paths.slice(0, 10).join(', ')}${paths.length > 10 ? ', …' : ''}`;
  throw new ToolgateError(
    ErrorCode.Denied,
    sandbox
      ? `the command changed protected paths, which were put back: ${named}. A sandboxed command cannot create, replace or remove a protected path`
      : `the command changed protected paths: ${named}. They could not be put back (no sandbox to do it in)`,
    {
      details: {
        paths: paths.slice(0, 100),
        restored: sandbox !== null,
        exitCode: result.exitCode,
        stdoutTail: result.stdout.tail(2048),
        stderrTail: result.stderr.tail(2048),
      },
    },
  );
}

/** Undoes `changes` in `cwd` (see {@link RESTORE_SCRIPT}); fails when something is left. */
export async function restoreProtected(
  sandbox: Sandbox,
  matcher: ProtectedPathMatcher,
  cwd: string,
  changes: ProtectedChanges,
): Promise<void> {
  const args: string[] = [];
  for (const rel of changes.created) args.push('rm', rel);
  for (const [rel, target] of changes.replacedLinks) args.push('ln', rel, target);
  const root = await realDirectory(cwd);
  const undone = new Set(
    [...changes.created, ...changes.replacedLinks.keys()].map((rel) => path.join(root, rel)),
  );
  // Everything else protected stays bound read-only while the restore runs — but not a link that
  // leads into what is undone (`.vscode` → `e`, the `e` a run made): binding it would hold `e`.
  const undoneReal = new Set(undone);
  for (const u of undone) {
    const real = await fs.realpath(u).catch(() => undefined);
    if (real !== undefined) undoneReal.add(real);
  }
  const leadsInto = async (p: string) => {
    const real = await fs.realpath(p).catch(() => undefined);
    return real !== undefined && [...undoneReal].some((u) => real === u || isInside(u, real));
  };
  const keep: string[] = [];
  for (const p of (await findProtectedPaths(matcher, [root])).paths) {
    if (!undone.has(p) && !(await leadsInto(p))) keep.push(p);
  }
  const run = await sandbox.run({
    argv: ['/bin/sh', '-c', RESTORE_SCRIPT, 'restore', ...args],
    cwd: root,
    env: { PATH: '/usr/bin:/bin' },
    protectedPaths: keep,
    timeoutMs: 30_000,
    maxOutputBytes: 16 * 1024,
  });
  if (run.ending !== 'exited' || run.exitCode !== 0) {
    throw new ToolgateError(
      ErrorCode.Internal,
      'the protected paths a command changed could not all be put back',
      { details: { paths: [...undone].map((p) => path.relative(root, p)).slice(0, 100) } },
    );
  }
}

/** The call's directory as a real path; an error names its errno, never the host path. */
async function realDirectory(cwd: string): Promise<string> {
  return fs.realpath(cwd).catch((err: NodeJS.ErrnoException) => {
    throw new ToolgateError(
      ErrorCode.ToolFailed,
      `the working directory cannot be used: ${err.code ?? 'error'}`,
    );
  });
}
