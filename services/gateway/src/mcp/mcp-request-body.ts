import type { IncomingMessage } from 'node:http';
import { DEFAULT_MAX_REQUEST_BODY_SIZE } from '@modelcontextprotocol/server';
import { withinJsonDepth } from '@toolgate/contracts';

/**
 * The JSON body of an MCP POST, read once from the Node stream and parsed, for the SDK's
 * `parsedBody`: without it the SDK's Node adapter turns the stream into a web `Request`, and the
 * handler clones that request (a tee of its web stream) to read and parse the body again — most
 * of what an MCP call costs the gateway beyond the dispatch itself.
 *
 * Only a body whose declared `Content-Length` is within the SDK's own bound is read here (Node's
 * HTTP parser holds a body to its declared length); anything else — chunked, too large, not a
 * POST — is left to the adapter, which bounds and refuses it as it always did. A body that is not
 * JSON answers `undefined`: the adapter then finds the stream consumed, an empty body, which the
 * SDK answers exactly as an unparseable one.
 */
export async function readMcpBody(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (
    req.method !== 'POST' ||
    !Number.isSafeInteger(declared) ||
    declared <= 0 ||
    declared > DEFAULT_MAX_REQUEST_BODY_SIZE
  ) {
    return undefined;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
  return withinJsonDepth(body, MAX_MCP_BODY_DEPTH) ? body : new TooDeepBody(body);
}

/**
 * How deep an MCP request may nest. The SDK serialises a parsed body again (`JSON.stringify`),
 * which runs out of stack at ~4,500 levels on Node 20 and answered `500 internal`; no tool's
 * arguments nest anywhere near this deep.
 */
export const MAX_MCP_BODY_DEPTH = 256;

/** A parsed body that nests deeper than {@link MAX_MCP_BODY_DEPTH}: answered here, not handed on. */
export class TooDeepBody {
  constructor(readonly body: unknown) {}

  /** The JSON-RPC error it is answered with: invalid request, Toolgate's code in `data`. */
  answer(): { status: number; json: unknown } {
    const id = (this.body as { id?: unknown } | null)?.id;
    return {
      status: 400,
      json: {
        jsonrpc: '2.0',
        id: typeof id === 'string' || typeof id === 'number' ? id : null,
        error: {
          code: -32600,
          message: `the request nests deeper than ${MAX_MCP_BODY_DEPTH} levels`,
          data: { code: 'invalid-request', retryable: false },
        },
      },
    };
  }
}
