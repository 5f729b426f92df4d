import { z } from 'zod';
import { AgentRefSchema, IsolationSchema } from './events';
import { SubjectTokenSchema as Token } from './subjects';
import { ToolNameSchema } from './tool-contract';

/**
 * What a team's remote tool worker receives on `subjects.remoteTool(tenant, tool)` (queue group =
 * subject): published by the tool-executor as a NATS request, answered by the worker (the SDK's
 * `serveTool`, or any NATS client) with `{ ok: true, result } | { ok: false, error: WireError }`.
 * At most once per request; the executor's redelivery makes the call as a whole at least once, and
 * `dispatchId` is the idempotency key.
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
  /** Milliseconds the worker has before the executor gives up on it. */
  deadlineMs: z.number().int().positive(),
});
export type RemoteToolRequest = z.infer<typeof RemoteToolRequestSchema>;
