import { StringDecoder } from 'node:string_decoder';
import fs, { type FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { NOFOLLOW, pathError, resolveForRead } from './execution-policy';
import { inFileScope } from './file-scope/file-scope-call';

const CHUNK_BYTES = 64 * 1024;
/** How far into a file we look for a NUL byte before calling it binary (what git and grep do). */
export const BINARY_SNIFF_BYTES = 8 * 1024;

const ReadFileParams = z
  .object({
    path: PathArg.describe('File to read, relative to the working directory or absolute.'),
    startLine: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('First line to return (1-based, inclusive).'),
    endLine: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Last line to return (1-based, inclusive).'),
    maxBytes: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Cap on the returned text; the policy cap still applies.'),
  })
  .refine((a) => a.startLine === undefined || a.endLine === undefined || a.endLine >= a.startLine, {
    message: 'endLine must not be before startLine',
    path: ['endLine'],
  });

/** What read_file returns. */
export interface ReadFileResult {
  path: string;
  content: string;
  /** The line numbers actually returned (1-based, inclusive); `endLine < startLine` when none. */
  startLine: number;
  endLine: number;
  /** The byte cap cut the content short. */
  truncated: boolean;
}

/** `read_file`: a text file (or a line range of it) under the read scopes, capped in bytes. */
export function createReadFileTool(deps: BuiltinDeps) {
  return tool({
    name: 'read_file',
    description:
      'Read a UTF-8 text file under the allowed read paths. Optionally a 1-based inclusive line range. ' +
      'Output is capped in bytes; `truncated` says when it was cut. Binary files are refused.',
    parameters: ReadFileParams,
    risk: 'read',
    async execute(args, ctx): Promise<ReadFileResult> {
      const policy = deps.policyFor(ctx);
      const cap = Math.min(args.maxBytes ?? policy.maxOutputBytes, policy.maxOutputBytes);
      const first = args.startLine ?? 1;
      if (deps.files) {
        // In the scope's own mount namespace: a racing rename reaches nothing outside the scope.
        const read = await inFileScope<{ content: string; endLine: number; truncated: boolean }>(
          deps.files,
          policy,
          'read',
          { path: args.path, first, last: args.endLine ?? null, cap },
          'read',
          { tool: 'read_file', signal: ctx.signal },
        );
        return { path: args.path, startLine: first, ...read };
      }
      const real = await resolveForRead(policy, policy.cwd, args.path);
      const last = args.endLine ?? Number.POSITIVE_INFINITY;
      let handle: FileHandle;
      try {
        handle = await fs.open(real, fs.constants.O_RDONLY | NOFOLLOW);
      } catch (err) {
        throw pathError(args.path, err);
      }
      try {
        if (!(await handle.stat()).isFile()) throw pathError(args.path, { code: 'EISDIR' });
        return await readLines(handle, args.path, first, last, cap, ctx.signal);
      } finally {
        await handle.close();
      }
    },
  });
}

/**
 * Streams the file chunk by chunk and keeps only the requested lines, so a line range deep in a
 * large file costs memory for the output, not for the file.
 */
async function readLines(
  handle: FileHandle,
  requested: string,
  first: number,
  last: number,
  cap: number,
  signal: AbortSignal,
): Promise<ReadFileResult> {
  const decoder = new StringDecoder('utf8');
  const buf = Buffer.alloc(CHUNK_BYTES);
  const out: string[] = [];
  let outBytes = 0;
  let line = 1;
  let lastReturned = first - 1;
  let truncated = false;
  let sniffed = 0;
  let done = false;

  // Appends text belonging to `line`; false once the cap is reached.
  const take = (text: string): boolean => {
    const bytes = Buffer.byteLength(text);
    if (outBytes + bytes <= cap) {
      out.push(text);
      outBytes += bytes;
      return true;
    }
    const room = cap - outBytes;
    // Cut at a character boundary: decoding a byte prefix drops a trailing partial character.
    const cut = new StringDecoder('utf8').write(Buffer.from(text).subarray(0, room));
    out.push(cut);
    outBytes += Buffer.byteLength(cut);
    truncated = true;
    return false;
  };

  while (!done) {
    if (signal.aborted) throw new ToolgateError(ErrorCode.Cancelled, 'read_file was cancelled');
    const { bytesRead } = await handle.read(buf, 0, CHUNK_BYTES, null);
    if (bytesRead === 0) break;
    const chunk = buf.subarray(0, bytesRead);
    if (sniffed < BINARY_SNIFF_BYTES) {
      const window = chunk.subarray(0, BINARY_SNIFF_BYTES - sniffed);
      if (window.includes(0)) {
        throw new ToolgateError(ErrorCode.ToolFailed, `${requested}: binary file, not read`, {
          details: { path: requested },
        });
      }
      sniffed += window.length;
    }
    const text = decoder.write(chunk);
    let start = 0;
    while (start <= text.length) {
      const nl = text.indexOf('\n', start);
      const piece = nl === -1 ? text.slice(start) : text.slice(start, nl + 1);
      if (piece.length > 0 && line >= first && line <= last) {
        lastReturned = line;
        if (!take(piece)) {
          done = true;
          break;
        }
      }
      if (nl === -1) break;
      line += 1;
      if (line > last) {
        done = true;
        break;
      }
      start = nl + 1;
    }
  }
  if (!done) {
    const tail = decoder.end();
    if (tail && line >= first && line <= last) {
      lastReturned = line;
      take(tail);
    }
  }
  return {
    path: requested,
    content: out.join(''),
    startLine: first,
    endLine: lastReturned,
    truncated,
  };
}
