export {
  compilePermissionChain,
  describePermissionChain,
  isPermissionChain,
  type CompileChainOptions,
  type PermissionChain,
} from './permission-chain';
export { evaluatePermission } from './permission-evaluator';
export { compilePermissionPreset, PRESET_TABLE, type CompiledPreset } from './preset-compiler';
export {
  compileShellMatcher,
  explainShellCommand,
  matchShellCommand,
  type ShellDecision,
  type ShellMatcher,
  type ShellPatternTables,
  type ShellSegmentDecision,
  type ShellVerdict,
} from './shell-match';
export { compileShellPattern, type ShellPattern } from './shell-pattern';
export { shellWriteTargets, type ShellWriteTarget, type ShellWriteTargets } from './shell-analysis';
export { SHELL_LIMITS } from './shell-lexer';
export { TAINT_RANK } from './taint-gate';
export {
  compilePolicyDocument,
  parsePolicyDocument,
  type CompiledPolicy,
  type PolicyClosures,
} from './policy-compiler';
export {
  DEFAULT_APPROVAL_TIMEOUT_MS,
  DEFAULT_HOOK_TIMEOUT_MS,
  EngineLayerSchema,
  ExpressionRuleSchema,
  OnTimeoutSchema,
  PermissionRuleSchema,
  PolicyDocumentSchema,
  PresetNameSchema,
  ProfileLayerSchema,
  ProtectedPathsSchema,
  RiskClassSchema,
  TaintAllowEntrySchema,
  TaintExceptionSchema,
  TaintPolicySchema,
  type EngineLayer,
  type ExpressionRule,
  type OnTimeout,
  type PermissionRule,
  type PolicyDocument,
  type PolicyDocumentInput,
  type PresetName,
  type ProfileLayer,
  type ProtectedPathsPolicy,
  type RiskClass,
  type TaintAllowEntry,
  type TaintException,
  type TaintPolicy,
} from './policy-document';
export {
  FETCH_TOOL_NAME,
  SHELL_TOOL_NAME,
  type AdvisoryMatch,
  type ApprovalSettings,
  type CanUseTool,
  type CanUseToolResult,
  type EvaluationContext,
  type HookContext,
  type HookResult,
  type ReasonedVerdict,
  type LayerClosures,
  type MatchedRule,
  type ModifiedInput,
  type NamedHook,
  type PermissionConfig,
  type PermissionDecision,
  type PermissionDiagnostic,
  type PermissionHook,
  type PermissionTool,
  type ProfilePermissions,
} from './permission-types';
export { checkFetchHost, type FetchHostVerdict } from './fetch-host-check';
export { canonicalHost } from './canonical-host';
export { compileHostPattern, matchHost, type HostPattern } from './domain-match';
export {
  compileProtectedPaths,
  DEFAULT_PROTECTED_PATHS,
  DEFAULT_PROTECTION,
  type ProtectedPathEffect,
  type ProtectedPathMatch,
  type ProtectedPaths,
  type ProtectedPathsConfig,
} from './protected-paths';
export { protectedFieldWrite, protectedShellWrite, type ProtectedWrite } from './protected-writes';
export { shellApprovalView } from './shell-approval-view';
