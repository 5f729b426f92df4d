type McpClientSdk = typeof import('@modelcontextprotocol/client');

/**
 * The MCP SDK's client half, loaded when the executor first talks to an upstream rather than with
 * the executor: an executor without MCP tools (and every test stack that never calls one) would
 * load it for nothing. The same module either way; types come from `import type`.
 */
let sdk: McpClientSdk | undefined;

export function mcpClientSdk(): McpClientSdk {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (sdk ??= require('@modelcontextprotocol/client') as McpClientSdk);
}
