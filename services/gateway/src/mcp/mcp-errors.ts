import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { ErrorCode, isRetryableCode, toWireError, type WireError } from '@toolgate/contracts';

/**
 * How a gateway error answers over MCP, once per boundary (the HTTP status table's counterpart):
 * `result` codes concern the call the model made and come back as a tool result with `isError`
 * (the model reads them and can correct itself), the others are JSON-RPC errors whose `data`
 * carries Toolgate's stable code and whether to retry.
 */
export const MCP_ANSWER_BY_CODE: Readonly<Record<ErrorCode, 'result' | ProtocolErrorCode>> = {
  [ErrorCode.Config]: ProtocolErrorCode.InvalidParams,
  [ErrorCode.InvalidRequest]: ProtocolErrorCode.InvalidParams,
  [ErrorCode.TooLarge]: ProtocolErrorCode.InvalidParams,
  // The spec's own answer to a tools/call naming no tool.
  [ErrorCode.UnknownTool]: ProtocolErrorCode.InvalidParams,
  [ErrorCode.InvalidArguments]: 'result',
  [ErrorCode.ModelRetry]: 'result',
  [ErrorCode.NonSerializableResult]: 'result',
  [ErrorCode.ExecutorUnregistered]: 'result',
  [ErrorCode.Denied]: 'result',
  [ErrorCode.Timeout]: 'result',
  [ErrorCode.AlreadyResolved]: ProtocolErrorCode.InvalidRequest,
  [ErrorCode.ApprovalMismatch]: ProtocolErrorCode.InvalidParams,
  [ErrorCode.ContractDrift]: 'result',
  [ErrorCode.Cancelled]: 'result',
  [ErrorCode.ToolFailed]: 'result',
  [ErrorCode.PathOutsideScope]: 'result',
  [ErrorCode.PoisonMessage]: ProtocolErrorCode.InternalError,
  [ErrorCode.ErrorCap]: 'result',
  [ErrorCode.Unauthorized]: ProtocolErrorCode.InvalidRequest,
  [ErrorCode.Forbidden]: ProtocolErrorCode.InvalidRequest,
  [ErrorCode.UnknownOperation]: ProtocolErrorCode.MethodNotFound,
  [ErrorCode.NotFound]: ProtocolErrorCode.InvalidParams,
  [ErrorCode.Conflict]: ProtocolErrorCode.InvalidRequest,
  [ErrorCode.Unavailable]: ProtocolErrorCode.InternalError,
  [ErrorCode.Internal]: ProtocolErrorCode.InternalError,
};

/** The answer for a thrown error: a wire error to turn into a tool result, or a protocol error. */
export function mcpAnswerFor(
  err: unknown,
): { kind: 'result'; error: WireError } | { kind: 'protocol'; error: ProtocolError } {
  const wire = toWireError(err);
  const answer = MCP_ANSWER_BY_CODE[wire.code] ?? ProtocolErrorCode.InternalError;
  if (answer === 'result') return { kind: 'result', error: wire };
  // An internal error's message is generic by construction (toWireError never leaks one).
  return {
    kind: 'protocol',
    error: new ProtocolError(answer, wire.message, {
      code: wire.code,
      retryable: isRetryableCode(wire.code),
      ...(wire.details ? { details: wire.details } : {}),
    }),
  };
}
