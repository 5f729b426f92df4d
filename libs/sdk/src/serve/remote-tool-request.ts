import { z } from 'zod';
import { AgentRefSchema, IsolationSchema, SUBJECT_TOKEN_PATTERN, ToolNameSchema } from '@toolgate/contracts';

const Token = z.string().regex(SUBJECT_TOKEN_PATTERN);

/**
 * What a remote tool worker receives on `subjects.remoteTool(tenant, tool)` from the tool-executor
 * (its `RemoteToolRequest`), and answers with a `ToolRunOutcome`. Parsed, not trusted: the worker
 * refuses a request that does not have this shape instead of running the tool on it.
 *
 * Kept in step with `services/tool-executor/src/execution/remote-executor.ts` by the SDK's
 * integration tests, which run real dispatches through a real executor.
 */
export const RemoteToolRequestSchema = z.object({
  dispatchId: Token,
  tenant: Token,
  runId: Token,
  toolName: ToolNameSchema,
  contractHash: z.string(),
  input: z.unknown(),
  agent: AgentRefSchema,
  isolation: IsolationSchema,
  cwd: z.string().optional(),
  deadlineMs: z.number().int().positive(),
});
export type RemoteToolRequest = z.infer<typeof RemoteToolRequestSchema>;
