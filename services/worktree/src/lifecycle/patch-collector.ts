import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, ToolgateError, type FileChange } from '@toolgate/contracts';
import { gitAt } from './git-repository';
import { linkTreeInto, removeTreeFiles } from './tree-files';

/** A collected patch before it is stored. */
export interface CollectedPatch {
  files: FileChange[];
  /** `git diff --binary` output, byte for byte; empty when nothing changed. */
  patch: Uint8Array;
  sha256: string;
}

/** Diff options that make the patch independent of the host's diff configuration. */
const DIFF_OPTIONS = [
  '--no-ext-diff',
  '--no-textconv',
  '--no-color',
  '--no-relative',
  '--find-renames',
  '--src-prefix=a/',
  '--dst-prefix=b/',
];

/** Files and directories a collect mirrors at most (see {@link linkTreeInto}). */
export const COLLECT_MAX_ENTRIES = 200_000;
/** The largest patch a collect stores: it is read whole, and stored whole. */
export const COLLECT_MAX_PATCH_BYTES = 64 * 1024 * 1024;
/**
 * The changed files' list at most, as JSON: it travels in the journal's `worktree-collected` and in
 * every later acquire's answer (`lastArtifact`), each bounded by the broker's payload limit.
 */
export const COLLECT_MAX_FILES_JSON_BYTES = 256 * 1024;

/**
 * Snapshots everything a worktree changed relative to `baseCommit`: tracked edits, staged and
 * unstaged, commits the agent made on its branch, deletions, renames, untracked (not ignored)
 * files and binaries.
 *
 * git never runs on the tree itself: a call of its agent may still run there, and git reads files
 * by name, following links — a file swapped for a link to a host file while git reads would put
 * the host file in the patch. The tree is mirrored first into a scratch directory under
 * `scratchRoot` (same filesystem, out of every call's reach), its files hard-linked, following no
 * link ({@link linkTreeInto}); git works on that mirror (`GIT_WORK_TREE`) with the tree's git
 * directory (`GIT_DIR`, never the tree's `.git` pointer file).
 *
 * The snapshot is staged into a temporary index (`GIT_INDEX_FILE`, seeded from a copy of the
 * tree's index so unchanged files are not re-hashed: the mirror's files are the same inodes), never
 * into the tree's own index, so the agent's working tree and staging area are exactly as it left
 * them. The patch is then checked with `git apply --check --cached` against a second temporary
 * index read from the base, so an artifact that would not apply is never stored. A tree, a patch or
 * a list of changed files over the limits above is refused (`too-large`) before anything is stored.
 */
export async function collectPatch(
  treePath: string,
  gitDir: string,
  /** The repository's common git directory, whose objects the tree's are. */
  commonDir: string,
  baseCommit: string,
  scratchRoot: string,
): Promise<CollectedPatch> {
  await mkdir(scratchRoot, { recursive: true });
  const tmp = await mkdtemp(path.join(scratchRoot, 'collect-'));
  try {
    const mirror = path.join(tmp, 'tree');
    await mkdir(mirror);
    await linkTreeInto(treePath, mirror, { maxEntries: COLLECT_MAX_ENTRIES });
    // Every object a collect writes (the snapshot's blobs and trees, written by `git add` before any
    // limit can be checked) goes to an object directory of its own in the scratch directory,
    // removed with it; the repository's objects are read through it as an alternate. A collect
    // refused as too large, or any collect, leaves the repository's object store as it was.
    const objects = path.join(tmp, 'objects');
    await mkdir(objects);
    const at = (env: Record<string, string> = {}) =>
      gitAt(mirror, {
        GIT_DIR: gitDir,
        GIT_WORK_TREE: mirror,
        GIT_OBJECT_DIRECTORY: objects,
        GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(commonDir, 'objects'),
        ...env,
      });
    const snapshotIndex = path.join(tmp, 'snapshot-index');
    const index = path.join(gitDir, 'index');
    await copyFile(index, snapshotIndex).then(
      // The copy keeps the index's mtime: git re-reads an entry whose file is no older than its
      // index ("racily clean": written in the index's second, its stat data proves nothing), and
      // a copy stamped now would make a file changed in the checkout's second, at the same size,
      // look unchanged — its change missing from the patch.
      async () => {
        const { atime, mtime } = await stat(index);
        await utimes(snapshotIndex, atime, mtime);
      },
      async (err: unknown) => {
        if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
        await at({ GIT_INDEX_FILE: snapshotIndex }).raw(['read-tree', baseCommit]);
      },
    );
    const snapshot = at({ GIT_INDEX_FILE: snapshotIndex });
    // Linking changed the files' ctime, nothing else: their index entries still hold.
    await snapshot.raw(['-c', 'core.trustctime=false', 'add', '--all', '--', '.']);

    // Everything below reads the snapshot (or writes an index of its own): one git process each,
    // side by side — each spawn costs tens of milliseconds here, and one after another they were
    // most of a collect's time.
    const patchFile = path.join(tmp, 'changes.patch');
    const checkIndex = path.join(tmp, 'check-index');
    const check = at({ GIT_INDEX_FILE: checkIndex });
    const [raw, numstat, staged] = await Promise.all([
      snapshot.raw(['diff', '--cached', '--raw', '-z', ...DIFF_OPTIONS, baseCommit, '--']),
      snapshot.raw(['diff', '--cached', '--numstat', '-z', ...DIFF_OPTIONS, baseCommit, '--']),
      // Paths the agent's own index knows that the base does not: added on purpose, not untracked.
      at().raw([
        'diff',
        '--cached',
        '--name-only',
        '-z',
        '--no-renames',
        '--diff-filter=A',
        baseCommit,
        '--',
      ]),
      snapshot.raw([
        'diff',
        '--cached',
        '--binary',
        '--full-index',
        ...DIFF_OPTIONS,
        `--output=${patchFile}`,
        baseCommit,
        '--',
      ]),
      // The base's tree in an index of its own, for the patch's check below.
      check.raw(['read-tree', baseCommit]),
    ]);

    const entries = parseRawDiff(raw);
    const nested = entries.find((e) => e.dstMode === '160000' && e.srcMode !== '160000');
    if (nested) {
      throw new ToolgateError(
        ErrorCode.PathOutsideScope,
        `the worktree contains a nested git repository at ${nested.path}`,
        {
          details: { path: nested.path, reason: 'git-metadata' },
        },
      );
    }
    const files = toFileChanges(entries, parseBinaryPaths(numstat), new Set(splitZ(staged)));
    const listed = Buffer.byteLength(JSON.stringify(files));
    if (listed > COLLECT_MAX_FILES_JSON_BYTES) {
      throw new ToolgateError(
        ErrorCode.TooLarge,
        `the worktree changed ${files.length} files, more than a patch artifact lists (${COLLECT_MAX_FILES_JSON_BYTES} bytes of names)`,
        { details: { files: files.length, maxBytes: COLLECT_MAX_FILES_JSON_BYTES } },
      );
    }
    const patchBytes = (await stat(patchFile)).size;
    if (patchBytes > COLLECT_MAX_PATCH_BYTES) {
      throw new ToolgateError(
        ErrorCode.TooLarge,
        `the worktree's patch is ${patchBytes} bytes, over the ${COLLECT_MAX_PATCH_BYTES}-byte limit`,
        { details: { bytes: patchBytes, maxBytes: COLLECT_MAX_PATCH_BYTES } },
      );
    }
    const patch = new Uint8Array(await readFile(patchFile));

    if (patch.byteLength > 0) {
      try {
        await check.raw(['apply', '--check', '--cached', patchFile]);
      } catch (err) {
        throw new ToolgateError(
          ErrorCode.Internal,
          'the collected patch does not apply to its base commit',
          {
            cause: err,
          },
        );
      }
    }
    const sha256 = createHash('sha256').update(patch).digest('hex');
    return { files, patch, sha256 };
  } finally {
    // Its own directory, out of every call's reach; removed following no link all the same.
    await removeTreeFiles(tmp, scratchRoot);
  }
}

/** One entry of `git diff --raw -z`. */
export interface RawDiffEntry {
  srcMode: string;
  dstMode: string;
  /** A, M, D, T, R (copies are not detected). */
  status: string;
  path: string;
  from?: string;
}

function splitZ(text: string): string[] {
  return text.split('\0').filter((s) => s.length > 0);
}

/** Parses `git diff --raw -z` output: `:<src mode> <dst mode> <src> <dst> <status>\0<path>[\0<path>]\0`. */
export function parseRawDiff(text: string): RawDiffEntry[] {
  const fields = text.split('\0');
  const entries: RawDiffEntry[] = [];
  for (let i = 0; i < fields.length; i++) {
    const header = fields[i];
    if (!header || !header.startsWith(':')) continue;
    const [srcMode = '', dstMode = '', , , statusField = ''] = header.slice(1).split(' ');
    const status = statusField.charAt(0);
    if (status === 'R' || status === 'C') {
      const from = fields[++i] ?? '';
      const to = fields[++i] ?? '';
      entries.push({ srcMode, dstMode, status, path: to, from });
    } else {
      entries.push({ srcMode, dstMode, status, path: fields[++i] ?? '' });
    }
  }
  return entries;
}

/** The destination paths `git diff --numstat -z` reports as binary (`-\t-`). */
export function parseBinaryPaths(text: string): Set<string> {
  const fields = text.split('\0');
  const binary = new Set<string>();
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i];
    if (!field) continue;
    const match = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(field);
    if (!match) continue;
    let dst = match[3] ?? '';
    if (dst === '') {
      // A rename: the source and destination follow as their own fields.
      i += 1;
      dst = fields[++i] ?? '';
    }
    if (match[1] === '-' && match[2] === '-') binary.add(dst);
  }
  return binary;
}

function toFileChanges(
  entries: RawDiffEntry[],
  binary: Set<string>,
  staged: Set<string>,
): FileChange[] {
  return entries.map((e): FileChange => {
    const isBinary = binary.has(e.path);
    switch (e.status) {
      case 'A':
        return {
          path: e.path,
          status: staged.has(e.path) ? 'added' : 'untracked',
          binary: isBinary,
        };
      case 'D':
        return { path: e.path, status: 'deleted', binary: isBinary };
      case 'R':
      case 'C':
        return { path: e.path, status: 'renamed', from: e.from ?? '', binary: isBinary };
      default:
        return { path: e.path, status: 'modified', binary: isBinary };
    }
  });
}
