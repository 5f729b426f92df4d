import type {
  DispatchOutcome,
  ListToolsResponse,
  Risk,
  SubmitDispatchResponse,
} from '@toolgate/contracts';
import type { CallToolResult, Tool, ToolAnnotations } from '@modelcontextprotocol/server';

/**
 * What every Toolgate tool answers over MCP, as `structuredContent`: the dispatch and how it ended.
 * A tool's own result is any JSON (its contract declares no output shape), so it is carried under
 * `result` rather than being the structured content itself, which MCP requires to be an object.
 */
export const DISPATCH_OUTPUT_SCHEMA = Object.freeze({
  type: 'object',
  properties: {
    dispatchId: { type: 'string' },
    runId: { type: 'string' },
    callId: { type: 'string' },
    outcome: { type: 'string', enum: ['ok', 'error', 'denied', 'suspended', 'running'] },
    result: {},
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' } },
      required: ['code', 'message'],
    },
    approval: {
      type: 'object',
      properties: { key: { type: 'string' }, expiresAt: { type: 'string' } },
      required: ['key'],
    },
  },
  required: ['dispatchId', 'runId', 'callId', 'outcome'],
} as const);

/**
 * Hints from the tool's declared risk. They are Toolgate's own statement about a tool it gates
 * (never copied from an upstream server): `read` is read-only; `write`, `execute` and
 * `destructive` may change the world; `network` reaches outside. An undeclared risk claims
 * nothing, so a client falls back to the protocol's cautious defaults.
 */
export function annotationsFor(risk: Risk | undefined): ToolAnnotations | undefined {
  switch (risk) {
    case 'read':
      return { readOnlyHint: true, destructiveHint: false, openWorldHint: false };
    case 'write':
    case 'execute':
    case 'destructive':
      return { readOnlyHint: false, destructiveHint: true };
    case 'network':
      return { readOnlyHint: false, openWorldHint: true };
    default:
      return undefined;
  }
}

/** A tenant's toolset as `tools/list` answers it: sorted by name, so every replica lists alike. */
export function toMcpTools(list: ListToolsResponse): Tool[] {
  return [...list.tools]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((tool) => {
      const annotations = annotationsFor(tool.policy.risk);
      return {
        name: tool.name,
        description: tool.description,
        inputSchema: { type: 'object', ...tool.parameters } as Tool['inputSchema'],
        outputSchema: DISPATCH_OUTPUT_SCHEMA as unknown as Tool['outputSchema'],
        ...(annotations ? { annotations } : {}),
        _meta: { 'io.toolgate/contractHash': tool.contractHash },
      };
    });
}

/** The ids that name a call over MCP (echoed so a legacy client can replay it). */
export interface CallIds {
  dispatchId: string;
  runId: string;
  callId: string;
}

/**
 * A settled dispatch as a tool result: `ok` is the result (text and structured), `denied` is an
 * error result whose text is the reason the chain gave (what the model should see), `error` names
 * the code and message.
 */
export function settledResult(ids: CallIds, settled: DispatchOutcome): CallToolResult {
  if (settled.outcome === 'ok') {
    const text =
      typeof settled.result === 'string' ? settled.result : JSON.stringify(settled.result ?? null);
    return {
      content: [{ type: 'text', text }],
      structuredContent: {
        ...ids,
        outcome: 'ok',
        ...(settled.result !== undefined ? { result: settled.result } : {}),
      },
    };
  }
  const error = settled.error ?? {
    code: settled.outcome,
    message: `the call ended ${settled.outcome}`,
  };
  const text =
    settled.outcome === 'denied' ? `denied: ${error.message}` : `${error.code}: ${error.message}`;
  return {
    content: [{ type: 'text', text }],
    structuredContent: {
      ...ids,
      outcome: settled.outcome,
      error: { code: error.code, message: error.message },
    },
    isError: true,
  };
}

/**
 * A call still pending (parked for approval, or running past the wait) as a 2025-era client gets
 * it: an error result that says so and names how to collect the outcome — the same call again with
 * the same run and call ids replays this dispatch (it never runs a second time).
 */
export function pendingResult(
  ids: CallIds,
  response: Pick<SubmitDispatchResponse, 'state'>,
  approval?: { key: string; expiresAt: string },
): CallToolResult {
  const parked = response.state === 'suspended';
  const how = `call it again with _meta {"io.toolgate/runId":"${ids.runId}","io.toolgate/callId":"${ids.callId}"} to collect its outcome`;
  const text = parked
    ? `this call is parked awaiting a person's approval (approval ${approval?.key ?? 'pending'}, dispatch ${ids.dispatchId}); once it is decided, ${how}`
    : `this call is still running (dispatch ${ids.dispatchId}); ${how}`;
  return {
    content: [{ type: 'text', text }],
    structuredContent: {
      ...ids,
      outcome: parked ? 'suspended' : 'running',
      ...(approval ? { approval } : {}),
    },
    isError: true,
  };
}
