import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
import { assertWriteNotProtected } from '@toolgate/worktree-guard';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { resolveForWrite } from './execution-policy';
import { inFileScope } from './file-scope/file-scope-call';

const WriteFileParams = z.object({
  path: PathArg.describe('File to write, relative to the working directory or absolute.'),
  content: z.string().describe('UTF-8 text to write.'),
  mode: z
    .enum(['overwrite', 'append', 'create'])
    .default('overwrite')
    .describe('overwrite (default), append, or create (fails if the file exists).'),
  createDirs: z
    .boolean()
    .default(true)
    .describe('Create missing parent directories (inside the write scope).'),
});

/** What write_file returns. */
export interface WriteFileResult {
  path: string;
  bytesWritten: number;
  /** The file did not exist before this call. */
  created: boolean;
}

/** `write_file`: writes UTF-8 text to a file under the write scopes. */
export function createWriteFileTool(deps: BuiltinDeps) {
  return tool({
    name: 'write_file',
    description:
      'Write UTF-8 text to a file under the allowed write paths: overwrite (default), append, or create ' +
      '(refuses an existing file). Missing parent directories are created unless createDirs is false.',
    parameters: WriteFileParams,
    risk: 'write',
    async execute(args, ctx): Promise<WriteFileResult> {
      const policy = deps.policyFor(ctx);
      const bytes = Buffer.byteLength(args.content);
      if (bytes > policy.maxWriteBytes) {
        throw new ToolgateError(
          ErrorCode.ToolFailed,
          `${args.path}: content is ${bytes} bytes, over the ${policy.maxWriteBytes}-byte limit`,
          { details: { path: args.path, bytes, limit: policy.maxWriteBytes } },
        );
      }
      // Resolution happens before any directory is created, so a symlinked parent pointing outside
      // the scope is refused without leaving a trace there.
      const real = await resolveForWrite(policy, policy.cwd, args.path);
      // The chain decided on the path as named; refuse one that reaches a protected path under
      // another name (a symlink, a git directory not called .git) before anything is created.
      await assertWriteNotProtected(deps.protectedPaths(ctx), {
        cwd: policy.cwd,
        requested: args.path,
        real,
      });
      // With the sandbox on, the write happens in the scope's own mount namespace: whatever a
      // racing rename makes the path point at, nothing outside the scope can be written. Inside
      // it, the helper writes at the checked real path following no symlink (a folder on the way
      // swapped for a link to a protected one refuses the write), so what was checked is what is
      // written.
      const { created } = await inFileScope<{ created: boolean }>(
        deps.files,
        policy,
        'write',
        {
          path: args.path,
          target: real,
          content: args.content,
          mode: args.mode,
          createDirs: args.createDirs,
        },
        'write',
        { tool: 'write_file', signal: ctx.signal },
      );
      return { path: args.path, bytesWritten: bytes, created };
    },
  });
}
