export {
  StoredPolicySchema,
  validateStoredPolicy,
  errorCapOf,
  DEFAULT_ERROR_CAP,
  type StoredPolicy,
  type RemoteClosure,
  type RemoteLayer,
} from './stored-policy';
export { remoteHook, remoteCanUseTool, type RemoteHookRequest } from './remote-closures';
export { PolicyRuntime, type CallFacts, type RevisionedDecision } from './policy-runtime';
export { PolicyReplay, type RecordedCall, type ReplayedCall } from './policy-replay';
export { ErrorCapReplay, type ErrorCapMark, type RecordedVerdict } from './error-cap-replay';
export { WhatIfTally, WHATIF_HOOKS_NOTE } from './whatif-report';
export {
  PolicyTestCaseSchema,
  PolicyTestCasesSchema,
  parsePolicyTestCases,
  runPolicyTests,
  type HookAnswer,
  type PolicyTestCase,
  type PolicyTestCases,
  type PolicyTestResult,
  type PolicyTestRun,
} from './policy-cases';
