export { startToolExecutor, type ToolExecutorOptions } from './tool-executor.service';
export { loadExecutorConfig, type ExecutorConfig } from './config';

export type { PendingCall } from './execution/pending-call';
