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
