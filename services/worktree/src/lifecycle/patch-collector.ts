import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, stat, utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, ToolgateError, type FileChange } from '@toolgate/contracts';
import { gitAt } from './git-repository';

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

/**
 * Snapshots everything a worktree changed relative to `baseCommit`: tracked edits, staged and
 * unstaged, commits the agent made on its branch, deletions, renames, untracked (not ignored)
 * files and binaries.
 *
 * The snapshot is staged into a temporary index (`GIT_INDEX_FILE`, seeded from a copy of the
 * tree's index so unchanged files are not re-hashed), never into the tree's own index, so the
 * agent's working tree and staging area are exactly as it left them. The patch is then checked
 * with `git apply --check --cached` against a second temporary index read from the base, so an
 * artifact that would not apply is never stored.
 */
export async function collectPatch(
  treePath: string,
  gitDir: string,
  baseCommit: string,
): Promise<CollectedPatch> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'toolgate-collect-'));
  try {
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
        await gitAt(treePath, { GIT_INDEX_FILE: snapshotIndex }).raw(['read-tree', baseCommit]);
      },
    );
    const snapshot = gitAt(treePath, { GIT_INDEX_FILE: snapshotIndex });
    await snapshot.raw(['add', '--all', '--', '.']);

    // Everything below reads the snapshot (or writes an index of its own): one git process each,
    // side by side — each spawn costs tens of milliseconds here, and one after another they were
    // most of a collect's time.
    const patchFile = path.join(tmp, 'changes.patch');
    const checkIndex = path.join(tmp, 'check-index');
    const check = gitAt(treePath, { GIT_INDEX_FILE: checkIndex });
    const [raw, numstat, staged] = await Promise.all([
      snapshot.raw(['diff', '--cached', '--raw', '-z', ...DIFF_OPTIONS, baseCommit, '--']),
      snapshot.raw(['diff', '--cached', '--numstat', '-z', ...DIFF_OPTIONS, baseCommit, '--']),
      // Paths the agent's own index knows that the base does not: added on purpose, not untracked.
      gitAt(treePath).raw([
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
    await rm(tmp, { recursive: true, force: true });
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
