import { constants as fsConstants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';

/**
 * The mounts that keep protected paths in a writable directory on the host whatever a run does —
 * for bubblewrap here, for runc in `@toolgate/container`: each protected path bound read-only over
 * the directory, and every folder on the way to one bound onto itself (a mount point cannot be
 * renamed or removed: EBUSY), so renaming a parent cannot carry the read-only bind away and put a
 * writable folder in its place.
 */
export interface ProtectedMounts {
  /** Real paths below the directory, to bind read-only. */
  readonly protectedPaths: readonly string[];
  /** Real paths of the folders between the directory and a protected path, to bind onto themselves. */
  readonly ancestorPaths: readonly string[];
}

/**
 * The protected mounts of `cwd` (real) for `paths` (absolute, or relative to it). Paths outside
 * `cwd`, and paths that do not exist, are skipped. A mount cannot be put on a symlink: where a
 * path is one, or goes through one, what it reaches inside `cwd` — what a program on the host
 * opening it gets — is bound read-only instead (what it reaches outside is not in the run's view
 * at all); the link itself is the caller's to check after the run. Nothing an earlier run left
 * in the directory refuses the run.
 */
export async function resolveProtectedMounts(
  cwd: string,
  paths: readonly string[],
): Promise<ProtectedMounts> {
  const found = new Set<string>();
  // The folders holding a protected path that is a symlink: bound onto themselves like every
  // folder on the way, so `mv a x && ln -s elsewhere a` cannot carry `a/.github` away and have the
  // link put back through a folder of the run's choosing.
  const linkFolders = new Set<string>();
  for (const rel of paths) {
    const abs = path.resolve(cwd, rel);
    if (!isBelow(cwd, abs)) continue;
    const stat = await fs.lstat(abs).catch(() => undefined);
    if (!stat) continue;
    if (stat.isSymbolicLink() && isBelow(cwd, path.dirname(abs))) {
      linkFolders.add(path.dirname(abs));
    }
    const real = await fs.realpath(abs).catch(() => undefined);
    if (real !== undefined && isBelow(cwd, real)) found.add(real);
  }
  const protectedPaths = [...found];
  const covered = (dir: string) => protectedPaths.some((p) => p === dir || isBelow(p, dir));
  const ancestors = new Set<string>();
  const holdFrom = (first: string) => {
    for (let dir = first; isBelow(cwd, dir); dir = path.dirname(dir)) {
      if (!covered(dir)) ancestors.add(dir);
    }
  };
  for (const p of protectedPaths) holdFrom(path.dirname(p));
  for (const folder of linkFolders) holdFrom(folder);
  return { protectedPaths, ancestorPaths: [...ancestors].sort() };
}

/** Linux `O_PATH`: a handle on the file itself, opened without reading it (nor blocking on a FIFO). */
const O_PATH = 0o10000000;

/**
 * Opens each protected path, then each folder on the way to one, as the descriptors to bind from
 * (pushed to `handles`, for the caller to close once the mounts are made), and returns the paths
 * opened, in that order. The path as opened must be the path that was checked — no symlink at its
 * end (O_NOFOLLOW) nor on the way (the descriptor's real path must be the same): a concurrent call
 * of the same directory that swaps a component for a symlink between the check and the bind would
 * otherwise bind a host file into the run (writable, for a folder on the way). A path gone since
 * it was resolved is skipped (what does not exist cannot be bound). Errors name paths relative to
 * `cwd` only.
 */
export async function openProtectedMounts(
  cwd: string,
  mounts: Partial<ProtectedMounts>,
  handles: FileHandle[],
): Promise<ProtectedMounts> {
  const refuse = (p: string, why: string) => {
    const rel = path.relative(cwd, p);
    return new ToolgateError(
      ErrorCode.Config,
      `${rel} in the working directory ${why}: the sandbox cannot keep it read-only`,
      { details: { path: rel } },
    );
  };
  const open = async (p: string, directory: boolean): Promise<boolean> => {
    let handle: FileHandle;
    try {
      handle = await fs.open(p, fsConstants.O_NOFOLLOW | O_PATH);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return false;
      // Node's message names the host path.
      throw refuse(p, `cannot be opened (${code ?? 'error'})`);
    }
    handles.push(handle);
    const [real, stat] = await Promise.all([
      fs.readlink(`/proc/self/fd/${handle.fd}`),
      handle.stat(),
    ]);
    if (real !== p || stat.isSymbolicLink() || (directory && !stat.isDirectory())) {
      throw refuse(p, 'is or went through a symlink');
    }
    return true;
  };
  const protectedPaths: string[] = [];
  for (const p of mounts.protectedPaths ?? []) if (await open(p, false)) protectedPaths.push(p);
  const ancestorPaths: string[] = [];
  for (const p of mounts.ancestorPaths ?? []) if (await open(p, true)) ancestorPaths.push(p);
  return { protectedPaths, ancestorPaths };
}

/**
 * Opens the scope paths of a run (its read-only paths, its directory, its writable paths: real
 * paths, checked by the plan) as the descriptors to bind them from, pushed to `handles` in order.
 * Each must still be the path the plan checked — no symlink at its end nor on the way — when it is
 * opened: another call that can write a scope's parent could otherwise swap it for a symlink to
 * the host's keys between the check and the bind. A path gone since is refused too.
 */
export async function openScopeMounts(
  scopes: readonly { path: string; directory: boolean }[],
  handles: FileHandle[],
): Promise<void> {
  for (const { path: p, directory } of scopes) {
    let handle: FileHandle;
    try {
      handle = await fs.open(p, fsConstants.O_NOFOLLOW | O_PATH);
    } catch (err) {
      throw new ToolgateError(
        ErrorCode.ToolFailed,
        `a directory of the run cannot be opened (${(err as NodeJS.ErrnoException).code ?? 'error'}): it changed while the run was prepared`,
      );
    }
    handles.push(handle);
    const [real, stat] = await Promise.all([
      fs.readlink(`/proc/self/fd/${handle.fd}`),
      handle.stat(),
    ]);
    if (real !== p || stat.isSymbolicLink() || (directory && !stat.isDirectory()))
      throw scopeMoved(path.basename(p));
  }
}

/**
 * A run's directory (or a scope, between its check and its bind) that is, or goes through, a
 * symlink that was not there when it was configured: refused, never followed — another call that
 * can write its parent could have put it there to bind the host's secrets into this run. Names
 * the last component only (the host path is the operator's).
 */
export function scopeMoved(name: string): ToolgateError {
  return new ToolgateError(
    ErrorCode.Denied,
    `the run's scope "${name}" is or goes through a symlink now: the sandbox binds only the real paths it was given, never what a link points to`,
    { details: { scope: name } },
  );
}

/** Whether `p` lies strictly below the directory `dir` (both absolute and normalised). */
export function isBelow(dir: string, p: string): boolean {
  return p.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}
