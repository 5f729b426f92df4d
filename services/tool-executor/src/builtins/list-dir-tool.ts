import { z } from 'zod';
import { tool } from '@toolgate/tools';
import { PathArg, type BuiltinDeps } from './builtin-deps';
import { inFileScope } from './file-scope/file-scope-call';

const ListDirParams = z.object({
  path: PathArg.default('.').describe(
    'Directory to list, relative to the working directory or absolute.',
  ),
  maxEntries: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Cap on entries; the policy cap still applies.'),
});

/** One directory entry. Symlinks are reported as such and never followed. */
export interface DirEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  /** Size in bytes, for regular files. */
  size?: number;
}

/** What list_dir returns. */
export interface ListDirResult {
  path: string;
  entries: DirEntry[];
  /** More entries exist than were returned. */
  truncated: boolean;
}

/** `list_dir`: the entries of one directory under the read scopes, sorted by name, bounded. */
export function createListDirTool(deps: BuiltinDeps) {
  return tool({
    name: 'list_dir',
    description:
      'List the entries of a directory under the allowed read paths (name, type, size for files), ' +
      'sorted by name. Symlinks are listed, not followed. Bounded; `truncated` says when entries were left out.',
    parameters: ListDirParams,
    risk: 'read',
    async execute(args, ctx): Promise<ListDirResult> {
      const policy = deps.policyFor(ctx);
      const cap = Math.min(args.maxEntries ?? policy.list.maxEntries, policy.list.maxEntries);
      const listed = await inFileScope<{ entries: DirEntry[]; truncated: boolean }>(
        deps.files,
        policy,
        'list',
        { path: args.path, cap },
        'read',
        { tool: 'list_dir', signal: ctx.signal },
      );
      return { path: args.path, ...listed };
    },
  });
}
