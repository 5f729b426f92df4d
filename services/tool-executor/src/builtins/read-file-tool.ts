import { z } from 'zod';
import { tool } from '@toolgate/tools';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { inFileScope } from './file-scope/file-scope-call';

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
      // In the scope's own mount namespace (sandbox on): a racing rename reaches nothing outside it.
      const read = await inFileScope<{ content: string; endLine: number; truncated: boolean }>(
        deps.files,
        policy,
        'read',
        { path: args.path, first, last: args.endLine ?? null, cap },
        'read',
        { tool: 'read_file', signal: ctx.signal },
      );
      return { path: args.path, startLine: first, ...read };
    },
  });
}
