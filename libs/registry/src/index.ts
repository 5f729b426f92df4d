export {
  ToolRegistry,
  type ScriptDirectoryInventory,
  type ScriptInstall,
  type ScriptToolRecord,
} from './tool-registry';
export { PolicyStore, type PolicyAtRevision } from './policy-store';
