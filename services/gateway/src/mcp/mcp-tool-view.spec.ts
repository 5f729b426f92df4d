import { fromJsonSchema, ProtocolError } from '@modelcontextprotocol/server';
import { ErrorCode, ToolgateError, type ToolView } from '@toolgate/contracts';
import { MCP_ANSWER_BY_CODE, mcpAnswerFor } from './mcp-errors';
import {
  annotationsFor,
  DISPATCH_OUTPUT_SCHEMA,
  pendingResult,
  settledResult,
  toMcpTools,
} from './mcp-tool-view';
import { callDigest, checkParkedCall, parkedCall } from './parked-call-state';

const tool = (name: string, risk?: ToolView['policy']['risk']): ToolView => ({
  name,
  description: `the ${name} tool`,
  parameters: { type: 'object', properties: { a: { type: 'string' } } },
  policy: { needsApproval: false, executor: 'inprocess', ...(risk ? { risk } : {}) },
  contractHash: `hash-${name}`,
  builtin: false,
});

const ids = { dispatchId: 'd1', runId: 'r1', callId: 'c1' };

async function conforms(value: unknown): Promise<boolean> {
  const result = await fromJsonSchema(DISPATCH_OUTPUT_SCHEMA as never)['~standard'].validate(value);
  return !result.issues;
}

describe('MCP tool view', () => {
  it('lists tools sorted by name whatever the registry order, with the contract hash', () => {
    const tools = toMcpTools({
      tools: [tool('zeta'), tool('alpha'), tool('Mid')],
      toolsetHash: 'h',
    });
    expect(tools.map((t) => t.name)).toEqual(['Mid', 'alpha', 'zeta']);
    expect(tools[1]).toMatchObject({
      description: 'the alpha tool',
      inputSchema: { type: 'object', properties: { a: { type: 'string' } } },
      outputSchema: DISPATCH_OUTPUT_SCHEMA,
      _meta: { 'io.toolgate/contractHash': 'hash-alpha' },
    });
  });

  it('derives annotations from the declared risk only', () => {
    expect(annotationsFor('read')).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    for (const risk of ['write', 'execute', 'destructive'] as const) {
      expect(annotationsFor(risk)).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    }
    expect(annotationsFor('network')).toMatchObject({ openWorldHint: true });
    expect(annotationsFor(undefined)).toBeUndefined();
    expect(toMcpTools({ tools: [tool('t')], toolsetHash: 'h' })[0]).not.toHaveProperty(
      'annotations',
    );
  });

  it('answers every outcome with structured content that matches the output schema', async () => {
    const ok = settledResult(ids, { outcome: 'ok', result: ['any', { json: 1 }] });
    expect(ok.isError).toBeUndefined();
    expect(await conforms(ok.structuredContent)).toBe(true);
    const denied = settledResult(ids, {
      outcome: 'denied',
      error: { code: 'denied', message: 'writes are frozen' },
    });
    expect(denied).toMatchObject({
      isError: true,
      content: [{ text: 'denied: writes are frozen' }],
    });
    expect(await conforms(denied.structuredContent)).toBe(true);
    const parked = pendingResult(
      ids,
      { state: 'suspended' },
      { key: 'k'.repeat(64), expiresAt: 'x' },
    );
    expect(parked.isError).toBe(true);
    expect(JSON.stringify(parked.content)).toContain('io.toolgate/runId');
    expect(await conforms(parked.structuredContent)).toBe(true);
    expect(await conforms({ ...ids, outcome: 'approved-by-me' })).toBe(false);
  });
});

describe('MCP error mapping', () => {
  it('has an answer for every error code', () => {
    expect(Object.keys(MCP_ANSWER_BY_CODE).sort()).toEqual(Object.values(ErrorCode).sort());
  });

  it('answers call errors as tool results and request errors as JSON-RPC errors with the stable code', () => {
    expect(mcpAnswerFor(new ToolgateError(ErrorCode.InvalidArguments, 'bad'))).toMatchObject({
      kind: 'result',
    });
    const unknown = mcpAnswerFor(new ToolgateError(ErrorCode.UnknownTool, 'unknown tool x'));
    expect(unknown.kind).toBe('protocol');
    const error = unknown.error as ProtocolError;
    expect(error.code).toBe(-32602);
    expect(error.data).toMatchObject({ code: 'unknown-tool', retryable: false });
    const crash = mcpAnswerFor(new Error('/secret/host/path exploded'));
    expect((crash.error as ProtocolError).message).toBe('internal error');
  });
});

describe('parked call state', () => {
  it('binds a state to its tool and canonical arguments', () => {
    const state = parkedCall(ids, 'deploy', { b: 1, a: [2] });
    expect(checkParkedCall(state, 'deploy', { a: [2], b: 1 })).toBeNull();
    expect(checkParkedCall(state, 'deploy', { a: [2], b: 2 })).toBe('another call');
    expect(checkParkedCall(state, 'other', { a: [2], b: 1 })).toBe('another call');
    expect(checkParkedCall({ ...state, v: 2 }, 'deploy', { a: [2], b: 1 })).toBe('malformed');
    expect(checkParkedCall('x', 'deploy', {})).toBe('malformed');
    expect(callDigest('deploy', undefined)).toBe(callDigest('deploy', {}));
    expect(parkedCall(ids, 'deploy', {}).nonce).not.toBe(state.nonce);
  });
});
