export { ToolRegistry } from './tool-registry';
export { PolicyStore, type PolicyAtRevision } from './policy-store';
