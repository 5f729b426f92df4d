export { createBuiltinTools, type BuiltinToolsOptions } from './builtin-tools';
export type { CheckDomain } from './builtin-deps';
