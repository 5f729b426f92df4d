import {
  closeSync,
  constants,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmdirSync,
  unlinkSync,
} from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';

/**
 * What the service does to a tree's files, on the host and outside every sandbox, while a call of
 * its agent may still run in it and rename anything there: a folder swapped for a link to a host
 * folder between a look and an open must not lead a removal or a read there. So nothing here
 * follows a link: every directory is opened with `O_NOFOLLOW` and every name is looked up in the
 * directory object opened before it (through `/proc/self/fd`, Node's `*at` calls). Whatever the
 * tree's calls move, what is read or removed is only ever what those calls could reach themselves.
 */

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/**
 * Entries a walk handles between two turns it gives back to the event loop: a walk is system calls
 * one after another (a collect mirrors up to `COLLECT_MAX_ENTRIES`, ~25 µs each here), and the service
 * answers every other tree's acquires, its broker and its probes on the same thread — so a walk
 * holds it for a few milliseconds at a time, never for the seconds a large tree takes whole.
 */
const SLICE_ENTRIES = 256;
/** Directories held open at once on the way down (one per level). */
const MAX_DEPTH = 256;
/** Passes over a directory a removal makes while something keeps filling it. */
const REMOVE_PASSES = 5;
/**
 * How long a removal goes on once it has found a directory refilled (a call still writing there),
 * wherever it is. Passes counted per directory alone did not bound it: a writer a few levels down
 * had its directory re-entered on every pass of every level above, and one writing faster than
 * the removal deletes made every pass longer than the last — a removal (and, walks being one at a
 * time, every other tree's walk) ran for as long as the writer did. A tree nothing writes to is
 * never refilled, whatever its size.
 */
const REFILLED_GRACE_MS = 2_000;

const at = (fd: number, name: string) => `/proc/self/fd/${fd}/${name}`;
const codeOf = (err: unknown) => (err as NodeJS.ErrnoException).code;

/**
 * Walks run one at a time, as when each held the thread whole: a walk keeps a descriptor open per
 * level (up to {@link MAX_DEPTH}), and walks of trees a tool nested deep, side by side, would
 * multiply that toward the process's limit.
 */
let walking: Promise<unknown> = Promise.resolve();
function oneWalkAtATime<T>(walk: () => Promise<T>): Promise<T> {
  const turn = walking.then(walk, walk);
  walking = turn.catch(() => undefined);
  return turn;
}

/** Counts a walk's entries; every {@link SLICE_ENTRIES}th waits for the event loop's next turn. */
function slices(): () => Promise<void> | undefined {
  let entries = 0;
  return () =>
    ++entries % SLICE_ENTRIES === 0
      ? new Promise<void>((resolve) => setImmediate(resolve))
      : undefined;
}

/** The child directory `name` of `fd`, opened without following a link; null when it is not one. */
function openChildDir(fd: number, name: string): number | null {
  try {
    return openSync(at(fd, name), DIR_FLAGS);
  } catch (err) {
    const code = codeOf(err);
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') return null;
    throw err;
  }
}

/** How much of a tree {@link linkTreeInto} takes before it refuses it. */
export interface SnapshotLimits {
  /** Files, links and directories. */
  maxEntries: number;
}

/**
 * Mirrors the tree at `tree` into the empty directory `into` (on the same filesystem, where no
 * call can reach): its directories made anew, every other entry hard-linked — a link as the link
 * it is, never its target; a file is the file's own inode, whose content its calls can still
 * change but never point elsewhere (a link costs no bytes: the limit is on entries). The tree's
 * top-level `.git` (its pointer to the repository) is left out. Over `limits` it throws
 * `too-large`; a tree nested deeper than {@link MAX_DEPTH} too.
 */
export function linkTreeInto(tree: string, into: string, limits: SnapshotLimits): Promise<void> {
  return oneWalkAtATime(async () => {
    // Entries taken so far, across every level.
    const size = { entries: 0, slice: slices() };
    const rootFd = openSync(tree, DIR_FLAGS);
    try {
      await linkDir(rootFd, into, 0, limits, size);
    } finally {
      closeSync(rootFd);
    }
  });
}

async function linkDir(
  fd: number,
  into: string,
  depth: number,
  limits: SnapshotLimits,
  size: { entries: number; slice: () => Promise<void> | undefined },
): Promise<void> {
  for (const name of readdirSync(`/proc/self/fd/${fd}`)) {
    if (depth === 0 && name === '.git') continue;
    await size.slice();
    if (++size.entries > limits.maxEntries) {
      throw tooLarge(`the worktree holds more than ${limits.maxEntries} files and directories`, {
        maxEntries: limits.maxEntries,
      });
    }
    const dest = path.join(into, name);
    const child = openChildDir(fd, name);
    if (child !== null) {
      try {
        if (depth + 1 >= MAX_DEPTH) {
          throw tooLarge(`the worktree nests directories deeper than ${MAX_DEPTH} levels`, {
            maxDepth: MAX_DEPTH,
          });
        }
        mkdirSync(dest);
        await linkDir(child, dest, depth + 1, limits, size);
      } finally {
        closeSync(child);
      }
      continue;
    }
    try {
      // link(2) takes a link as itself: whatever `name` is by now, it is not followed.
      linkSync(at(fd, name), dest);
    } catch (err) {
      if (codeOf(err) === 'ENOENT') continue; // Removed since it was listed.
      // A directory by now (link(2) refuses one): swapped while this mirror was made.
      if (codeOf(err) === 'EPERM') throw changedMeanwhile(err);
      throw err;
    }
  }
}

/**
 * Removes the directory `dir` and everything in it, following no link: a link is removed as a
 * link, and a folder swapped for one while the removal runs is never entered. A level deeper than
 * {@link MAX_DEPTH} is moved out first, under a fresh name into `spill` (a directory of the
 * service's on the same filesystem, which no call reaches), and removed from there. Entries still
 * appearing after {@link REMOVE_PASSES} passes over a directory, or {@link REFILLED_GRACE_MS}
 * after the first directory found refilled (a call still writing there), fail it (`conflict`).
 * Nothing there: done.
 */
export function removeTreeFiles(dir: string, spill: string): Promise<void> {
  return oneWalkAtATime(async () => {
    const pending = [dir];
    const removal: Removal = { slice: slices(), dir };
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      await removeDir(next, spill, pending, removal);
    }
  });
}

/** What one removal shares across its directories: its slices and its {@link REFILLED_GRACE_MS}. */
interface Removal {
  slice: () => Promise<void> | undefined;
  /** When a removal that found a directory refilled fails (`performance.now()`); none found yet. */
  refilledUntil?: number;
  /** The tree being removed, for the error. */
  dir: string;
}

/** A directory was found refilled: the removal has {@link REFILLED_GRACE_MS} from the first. */
function refilled(removal: Removal): void {
  removal.refilledUntil ??= performance.now() + REFILLED_GRACE_MS;
  stillRemoving(removal);
}

/** Fails the removal (`conflict`) once its grace after a refill is over. */
function stillRemoving(removal: Removal): void {
  if (removal.refilledUntil === undefined || performance.now() <= removal.refilledUntil) return;
  throw new ToolgateError(ErrorCode.Conflict, `${removal.dir} kept filling while it was removed`, {
    details: { path: removal.dir },
  });
}

async function removeDir(
  dir: string,
  spill: string,
  spilled: string[],
  removal: Removal,
): Promise<void> {
  let rootFd: number;
  try {
    rootFd = openSync(dir, DIR_FLAGS);
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return;
    throw err;
  }
  try {
    const moveOut = (fd: number, name: string) => {
      mkdirSync(spill, { recursive: true });
      const to = path.join(spill, `removing-${randomUUID()}`);
      renameSync(at(fd, name), to);
      spilled.push(to);
    };
    for (let pass = 0; ; pass++) {
      await emptyDir(rootFd, 0, moveOut, removal);
      if (readdirSync(`/proc/self/fd/${rootFd}`).length === 0) break;
      refilled(removal);
      if (pass >= REMOVE_PASSES) {
        throw new ToolgateError(ErrorCode.Conflict, `${dir} kept filling while it was removed`, {
          details: { path: dir },
        });
      }
    }
  } finally {
    closeSync(rootFd);
  }
  try {
    rmdirSync(dir);
  } catch (err) {
    if (codeOf(err) !== 'ENOENT') throw err;
  }
}

async function emptyDir(
  fd: number,
  depth: number,
  moveOut: (fd: number, name: string) => void,
  removal: Removal,
): Promise<void> {
  for (let pass = 0; pass < REMOVE_PASSES; pass++) {
    const names = readdirSync(`/proc/self/fd/${fd}`);
    if (!names.length) return;
    if (pass > 0) refilled(removal);
    for (const name of names) {
      stillRemoving(removal);
      await removal.slice();
      const child = openChildDir(fd, name);
      if (child === null) {
        try {
          unlinkSync(at(fd, name));
        } catch (err) {
          // Gone, or a directory by now: the next pass sees it as it is.
          if (codeOf(err) !== 'ENOENT' && codeOf(err) !== 'EISDIR') throw err;
        }
        continue;
      }
      try {
        if (depth + 1 >= MAX_DEPTH) {
          // Too deep to hold every level open: moved out, removed from there.
          moveOut(fd, name);
          continue;
        }
        await emptyDir(child, depth + 1, moveOut, removal);
      } finally {
        closeSync(child);
      }
      try {
        rmdirSync(at(fd, name));
      } catch (err) {
        const code = codeOf(err);
        // Gone, refilled, or swapped for a link meanwhile: the next pass sees it as it is.
        if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'ENOTDIR') throw err;
      }
    }
  }
}

function tooLarge(message: string, details: Record<string, number>): ToolgateError {
  return new ToolgateError(ErrorCode.TooLarge, message, { details });
}

function changedMeanwhile(cause: unknown): ToolgateError {
  return new ToolgateError(
    ErrorCode.Conflict,
    'the worktree changed while it was collected: collect again once its calls are done',
    { cause },
  );
}
