export { tool, type ToolDef, type ToolDefinition } from './tool-definition';
export { runTool, type ToolRunOutcome } from './run-tool';
