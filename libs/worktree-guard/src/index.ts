/**
 * Path guards for worktree-isolated dispatches. The tool-executor pins `ctx.cwd` with
 * {@link resolveInside}; the worktree service checks a tree's `.git` file with
 * {@link assertWorktreeGitFile} before running git in it. Pure path logic over `node:fs`.
 */
export {
  resolveInside,
  isInside,
  assertWorktreeGitFile,
  parseGitDirPointer,
  type ResolveInsideOptions,
  type RefusalReason,
} from './resolve-inside';
