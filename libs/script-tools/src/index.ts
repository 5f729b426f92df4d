export {
  parseScriptDirectives,
  paramsSchema,
  PARAM_TYPES,
  type ParamDirective,
  type ParamType,
  type ScriptDirectives,
} from './script-directives';
export {
  checkScript,
  isReservedScriptName,
  riskCovers,
  riskOfRequires,
  type ScriptCheck,
  type ScriptCheckOptions,
  type ScriptFiles,
  type ScriptManifest,
} from './script-manifest';
export {
  DEFAULT_SCRIPT_LIMITS,
  ScriptEngine,
  type HostFunction,
  type ScriptLimits,
  type ScriptRun,
} from './script-engine';
