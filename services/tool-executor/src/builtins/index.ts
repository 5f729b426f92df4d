export { createBuiltinTools, type BuiltinToolsOptions } from './builtin-tools';
export type { BuiltinDeps, CheckDomain, DomainVerdict } from './builtin-deps';
export {
  buildEnv,
  ExecutionPolicySchema,
  isWithin,
  parseExecutionPolicy,
  policyForContext,
  resolveForRead,
  resolveForWrite,
  SAFE_ENV_VARS,
  type ExecutionPolicy,
  type ExecutionPolicyInput,
  type PathAccess,
} from './execution-policy';
export { createReadFileTool, type ReadFileResult } from './read-file-tool';
export { createListDirTool, type DirEntry, type ListDirResult } from './list-dir-tool';
export { createGrepTool, type GrepMatch, type GrepResult } from './grep-tool';
export { createWriteFileTool, type WriteFileResult } from './write-file-tool';
export { createShellTool, type ShellResult } from './shell-tool';
export { createHttpFetchTool, normalizeHost, type HttpFetchResult } from './http-fetch-tool';
