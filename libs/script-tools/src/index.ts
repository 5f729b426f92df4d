export {
  parseScriptDirectives,
  paramsSchema,
  type ParamDirective,
  type ParamType,
  type ScriptDirectives,
} from './script-directives';
export {
  checkScript,
  riskCovers,
  riskOfRequires,
  type ScriptCheck,
  type ScriptCheckOptions,
  type ScriptFiles,
  type ScriptManifest,
} from './script-manifest';
export {
  ScriptEngine,
  type HostFunction,
  type ScriptLimits,
  type ScriptRun,
} from './script-engine';
