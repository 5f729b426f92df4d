export { startToolExecutor, type ToolExecutorOptions } from './tool-executor.service';
export { loadExecutorConfig, SANDBOX_OFF_WARNING, type ExecutorConfig } from './config';
export { openExecutorPolicy, type ExecutorPolicyDecisions } from './executor-policy';

export type { PendingCall } from './execution/pending-call';
export { ExecutorMetricName } from './execution/executor-metrics';
export { ScriptExecutor, type ScriptSource } from './scripts/script-executor';
export { createBuiltinTools, type BuiltinToolsOptions } from './builtins/builtin-tools';
