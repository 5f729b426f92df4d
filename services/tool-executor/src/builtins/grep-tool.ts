import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { inFileScope } from './file-scope/file-scope-call';

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
      // The walk and the regex run in the scope's helper (or, sandbox off, a worker thread); the
      // deadline kills it mid-match.
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
    },
  });
}
