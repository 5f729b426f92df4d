export { KvCache, type Revisioned } from './kv-cache';
export { ToolRegistry } from './tool-registry';
export { PolicyStore, type PolicyAtRevision } from './policy-store';
