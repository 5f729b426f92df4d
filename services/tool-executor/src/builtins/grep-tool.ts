import fs from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { NOFOLLOW, pathError, resolveForRead, type ExecutionPolicy } from './execution-policy';
import { inFileScope } from './file-scope/file-scope-call';
import { BINARY_SNIFF_BYTES } from './read-file-tool';

/** Directories grep never descends into: version-control internals are noise and can be huge. */
const SKIPPED_DIRS: ReadonlySet<string> = new Set(['.git', '.hg', '.svn']);
/** A matching line is returned up to this many characters. */
const MAX_LINE_CHARS = 500;

// No `u` flag: unicode mode rejects escapes such as `\-` that grep-style patterns use freely.
const flagsFor = (ignoreCase: boolean): string => (ignoreCase ? 'i' : '');

const isRegExp = (pattern: string, ignoreCase: boolean): boolean => {
  try {
    new RegExp(pattern, flagsFor(ignoreCase));
    return true;
  } catch {
    return false;
  }
};

const GrepParams = z
  .object({
    pattern: z
      .string()
      .min(1)
      .max(1000)
      .describe('A JavaScript regular expression, matched against each line.'),
    path: PathArg.default('.').describe(
      'Directory (searched recursively) or file, relative to the working directory.',
    ),
    ignoreCase: z.boolean().default(false),
    maxResults: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Cap on matches; the policy cap still applies.'),
  })
  .refine((a) => isRegExp(a.pattern, a.ignoreCase), {
    message: 'not a valid JavaScript regular expression',
    path: ['pattern'],
  });

/** One matching line. `file` is the requested path joined with the file's path under it. */
export interface GrepMatch {
  file: string;
  line: number;
  text: string;
}

/** What grep returns. */
export interface GrepResult {
  matches: GrepMatch[];
  filesScanned: number;
  /** Files skipped as binary or over the per-file size cap. */
  filesSkipped: number;
  /** A cap (matches or files) stopped the search early. */
  truncated: boolean;
}

/**
 * `grep`: a regular expression over the text files under a directory in the read scopes. Pure
 * JavaScript; `.git` is skipped, binary and oversized files are skipped, symlinks are not followed
 * (so the walk never leaves the resolved, scope-checked root), and results are bounded.
 *
 * The regex runs in a worker thread: a model-written pattern can backtrack catastrophically, and
 * a synchronous regex cannot be interrupted on the event loop that serves every other dispatch.
 * The worker is terminated on the deadline or on abort.
 */
export function createGrepTool(deps: BuiltinDeps) {
  return tool({
    name: 'grep',
    description:
      'Search files under a directory (recursively; .git skipped, binary files skipped, symlinks not followed) ' +
      'for lines matching a JavaScript regular expression. Returns file, 1-based line and text, bounded.',
    parameters: GrepParams,
    risk: 'read',
    async execute(args, ctx): Promise<GrepResult> {
      const policy = deps.policyFor(ctx);
      const maxMatches = Math.min(
        args.maxResults ?? policy.grep.maxMatches,
        policy.grep.maxMatches,
      );
      const timedOut = () =>
        new ToolgateError(
          ErrorCode.Timeout,
          `grep did not finish within ${policy.grep.timeoutMs} ms`,
        );
      if (deps.files) {
        // The walk and the regex run in the scope's helper; the deadline kills it mid-match.
        return inFileScope<GrepResult>(
          deps.files,
          policy,
          'grep',
          {
            path: args.path,
            pattern: args.pattern,
            flags: flagsFor(args.ignoreCase),
            maxMatches,
            maxFiles: policy.grep.maxFiles,
            maxFileBytes: policy.grep.maxFileBytes,
          },
          'read',
          {
            tool: 'grep',
            signal: ctx.signal,
            timeout: { ms: policy.grep.timeoutMs, error: timedOut },
          },
        );
      }
      const root = await resolveForRead(policy, policy.cwd, args.path);
      const matcher = new RegexWorker(args.pattern, flagsFor(args.ignoreCase));
      const deadline = setTimeout(() => matcher.fail(timedOut()), policy.grep.timeoutMs);
      const onAbort = () =>
        matcher.fail(new ToolgateError(ErrorCode.Cancelled, 'grep was cancelled'));
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        return await search(root, args.path, policy, maxMatches, matcher);
      } finally {
        clearTimeout(deadline);
        ctx.signal.removeEventListener('abort', onAbort);
        await matcher.close();
      }
    },
  });
}

async function search(
  root: string,
  shownRoot: string,
  policy: ExecutionPolicy,
  maxMatches: number,
  matcher: RegexWorker,
): Promise<GrepResult> {
  const result: GrepResult = { matches: [], filesScanned: 0, filesSkipped: 0, truncated: false };
  let rootStat;
  try {
    rootStat = await fs.stat(root);
  } catch (err) {
    throw pathError(shownRoot, err);
  }
  // Depth-first over an explicit stack; entries are sorted so results are stable run to run.
  const stack: string[] = rootStat.isDirectory() ? [''] : [];
  const files: string[] = rootStat.isFile() ? [''] : [];
  const scanFile = async (rel: string): Promise<boolean> => {
    if (result.filesScanned + result.filesSkipped >= policy.grep.maxFiles) {
      result.truncated = true;
      return false;
    }
    const text = await readText(path.join(root, rel), policy.grep.maxFileBytes);
    if (text === undefined) {
      result.filesSkipped += 1;
      return true;
    }
    result.filesScanned += 1;
    const hits = await matcher.match(text, maxMatches - result.matches.length);
    const shown = rel === '' ? shownRoot : path.join(shownRoot, rel);
    for (const [line, lineText] of hits) result.matches.push({ file: shown, line, text: lineText });
    if (result.matches.length >= maxMatches) {
      result.truncated = true;
      return false;
    }
    return true;
  };

  for (const f of files) if (!(await scanFile(f))) return result;
  while (stack.length > 0) {
    const rel = stack.pop() as string;
    let entries;
    try {
      entries = await fs.readdir(path.join(root, rel), { withFileTypes: true });
    } catch {
      continue; // unreadable directory: skip it, like grep -r does
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const dirs: string[] = [];
    for (const e of entries) {
      const childRel = rel === '' ? e.name : path.join(rel, e.name);
      if (e.isDirectory()) {
        if (!SKIPPED_DIRS.has(e.name)) dirs.push(childRel);
      } else if (e.isFile()) {
        if (!(await scanFile(childRel))) return result;
      }
      // Symlinks and special files are not followed: the walk stays under the checked root.
    }
    for (let i = dirs.length - 1; i >= 0; i -= 1) stack.push(dirs[i] as string);
  }
  return result;
}

/** The file's text, or undefined when it is binary, oversized or unreadable. */
async function readText(file: string, maxBytes: number): Promise<string | undefined> {
  let handle;
  try {
    handle = await fs.open(file, fs.constants.O_RDONLY | NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile() || st.size > maxBytes) return undefined;
    const buf = await handle.readFile();
    if (buf.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return undefined;
    return buf.toString('utf8');
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/**
 * The worker's whole program, as plain JavaScript: it compiles the pattern once and answers
 * `{ id, text, max }` with `{ id, hits: [[line, text], ...] }`.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const re = new RegExp(workerData.pattern, workerData.flags);
parentPort.on('message', ({ id, text, max }) => {
  const hits = [];
  const lines = text.split('\\n');
  for (let i = 0; i < lines.length && hits.length < max; i += 1) {
    let line = lines[i];
    if (line.endsWith('\\r')) line = line.slice(0, -1);
    if (i === lines.length - 1 && line === '') break;
    if (re.test(line)) hits.push([i + 1, line.length > ${MAX_LINE_CHARS} ? line.slice(0, ${MAX_LINE_CHARS}) : line]);
  }
  parentPort.postMessage({ id, hits });
});
`;

/** A regex running in its own thread, matched file by file, killable at any moment. */
class RegexWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<
    number,
    { resolve(hits: [number, string][]): void; reject(e: unknown): void }
  >();
  private nextId = 0;
  private failure: ToolgateError | undefined;

  constructor(pattern: string, flags: string) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { pattern, flags } });
    this.worker.on('message', (m: { id: number; hits: [number, string][] }) => {
      this.pending.get(m.id)?.resolve(m.hits);
      this.pending.delete(m.id);
    });
    this.worker.on('error', () =>
      this.fail(new ToolgateError(ErrorCode.ToolFailed, 'grep: the matcher failed')),
    );
    // Keep an idle matcher from holding the process open.
    this.worker.unref();
  }

  match(text: string, max: number): Promise<[number, string][]> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, text, max });
    });
  }

  /** Kills the thread mid-regex and fails every pending match with `why`. */
  fail(why: ToolgateError): void {
    this.failure ??= why;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
    void this.worker.terminate();
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
