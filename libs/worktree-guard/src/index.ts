/**
 * Path guards for worktree-isolated dispatches. The worktree service checks a tree's `.git` file
 * with {@link assertWorktreeGitFile} before running git in it; {@link isInside} is the one lexical
 * containment check (the executor's path scopes use it too); {@link resolveInside} resolves a
 * tool-relative path inside a tree. Pure path logic over `node:fs`.
 */
export {
  resolveInside,
  isInside,
  assertWorktreeGitFile,
  parseGitDirPointer,
  type ResolveInsideOptions,
  type RefusalReason,
} from './resolve-inside';
export {
  assertWriteNotProtected,
  enclosingGitDirectory,
  findProtectedPaths,
  isGitDirectory,
  type FindProtectedPathsOptions,
  type ProtectedOnDisk,
  type ProtectedPathMatcher,
  type ProtectedPathsOnDisk,
} from './protected-path-guard';
