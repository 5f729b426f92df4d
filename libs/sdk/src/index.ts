export {
  tool,
  runTool,
  type ToolDef,
  type ToolDefinition,
  type ToolRunOutcome,
} from '@toolgate/tools';
export {
  ModelRetry,
  ToolgateError,
  ErrorCode,
  hasErrorCode,
  PageLimit,
  fromWireError,
  type ToolContext,
  type ToolLogLevel,
  type AgentRef,
  type Isolation,
  type Taint,
  type DispatchOutcome,
  type WireError,
  type ListToolsResponse,
  type ToolView,
} from '@toolgate/contracts';
export {
  createClient,
  type ClientOptions,
  type DispatchRequest,
  type RegisteredToolView,
  type ResolveApprovalOptions,
  type ToolgateClient,
} from './client/toolgate-client';
export type {
  ApprovalDetail,
  ApprovalFilter,
  ApprovalListItem,
  ApprovalView,
  InputPreview,
  ListApprovalsResponse,
} from './client/approval-view';
export type {
  DispatchHandle,
  ResolveApprovalResult,
  ResolveExternalOptions,
  TypedDispatchOutcome,
} from './dispatch/dispatch-handle';
export {
  toDispatchEvent,
  type ApprovalPendingEvent,
  type DispatchEvent,
  type DispatchEventName,
  type DispatchEvents,
  type ToolEndEvent,
  type ToolStartEvent,
} from './dispatch/tool-events';
export { RemoteToolRequestSchema, type RemoteToolRequest } from '@toolgate/contracts';
export type { ServedTool, ServeToolOptions, ToolLogEntry } from './serve/serve-tool';
export type { HookAnswer, HookHandler, ServedHook, ServeHookOptions } from './serve/serve-hook';
export { RemoteHookRequestSchema, type RemoteHookRequest } from '@toolgate/contracts';
