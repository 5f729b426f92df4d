import type { IncomingMessage, ServerResponse } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpEdge, type McpEdge, type McpEdgeOptions } from './mcp-edge';
import { readMcpBody, TooDeepBody } from './mcp-request-body';

/** The MCP edge and its handler for Node's (and express's) requests. */
export interface McpNodeHandler {
  readonly edge: McpEdge;
  serve(req: IncomingMessage, res: ServerResponse): void;
}

/**
 * The MCP edge, a web-standard handler of the SDK's, adapted once for Node. The body is read and
 * parsed once, here (see readMcpBody); a client gone mid-body has nothing to be answered.
 */
export function mcpNodeHandler(options: McpEdgeOptions): McpNodeHandler {
  const edge = createMcpEdge(options);
  const handle = toNodeHandler(edge);
  return {
    edge,
    serve: (req, res) =>
      void readMcpBody(req).then(
        (body) => {
          if (!(body instanceof TooDeepBody)) return void handle(req, res, body);
          const { status, json } = body.answer();
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
        },
        () => res.destroy(),
      ),
  };
}
