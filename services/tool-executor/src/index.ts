export { startToolExecutor, type ToolExecutorOptions } from './tool-executor.service';
export { loadExecutorConfig, type ExecutorConfig } from './config';
export type { RemoteToolRequest } from './execution/remote-executor';
export type { PendingCall } from './execution/pending-call';
