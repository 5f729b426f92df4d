import type * as McpClientSdk from '@modelcontextprotocol/client';
import {
  ErrorCode,
  ImportMcpToolsRequestSchema,
  importedToolName,
  mcpDefinitionHash,
  RegisteredToolSchema,
  TOOL_NAME_PATTERN,
  ToolgateError,
  isStdioUpstream,
  type ImportMcpToolsResponse,
  type McpHttpUpstream,
  type McpListToolsReply,
  type McpListToolsRequest,
  type McpUpstream,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import { parseRequest } from '../api/parse-request';
import type { Principal } from '../auth/token-auth';

/**
 * The MCP SDK's client half, loaded with the first import rather than with the gateway: a gateway
 * that never imports MCP tools (and every test stack that does not) would load it for nothing.
 */
let clientSdk: typeof McpClientSdk | undefined;
function mcpClientSdk(): typeof McpClientSdk {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (clientSdk ??= require('@modelcontextprotocol/client') as typeof McpClientSdk);
}

/**
 * Imports an upstream MCP server's tools for a tenant (an admin's act, and how a changed tool is
 * re-approved): lists them with Toolgate's own credential for the server and registers each as a
 * tool `<server>__<tool>` with executor `mcp`. A stdio server runs only in the tool-executor's
 * sandbox: the executor lists it (`listStdio`, a signed request) with the process calls will use. The contract is the upstream's description and
 * input schema, versioned by the digest of the whole definition, so a re-approved definition is a
 * new contract (a policy or an approval bound to the old one does not carry over). Risk and
 * approval come from the admin's request; the server's annotations decide nothing.
 */
export class McpImporter {
  private readonly upstreams: ReadonlyMap<string, McpUpstream>;

  constructor(
    upstreams: readonly McpUpstream[],
    private readonly registry: ToolRegistry,
    private readonly listStdio: (
      request: McpListToolsRequest,
    ) => Promise<McpListToolsReply['tools']>,
  ) {
    this.upstreams = new Map(upstreams.map((u) => [u.name, u]));
  }

  async import(principal: Principal, body: unknown): Promise<ImportMcpToolsResponse> {
    const req = parseRequest(ImportMcpToolsRequestSchema, body);
    const { server } = req;
    const upstream = this.upstreams.get(server);
    if (!upstream || !upstream.tenants.includes(principal.tenant)) {
      throw new ToolgateError(
        ErrorCode.NotFound,
        `no MCP server ${server} is configured for this tenant`,
        {
          details: { server },
        },
      );
    }
    const tools = isStdioUpstream(upstream)
      ? await this.listStdio({ tenant: principal.tenant, server }).catch((cause: unknown) => {
          // The executor's typed error (not-found, unavailable…) keeps its code; its words stay.
          const code = (cause as { code?: unknown })?.code;
          throw new ToolgateError(
            code === ErrorCode.NotFound ? ErrorCode.NotFound : ErrorCode.Unavailable,
            `the MCP server ${server} could not be listed`,
            { cause, details: { server } },
          );
        })
      : await this.listUpstream(upstream);
    const wanted = req.tools ? new Set(req.tools) : undefined;
    const response: ImportMcpToolsResponse = { server, imported: [], skipped: [], toolsetHash: '' };
    for (const name of wanted ?? []) {
      if (!tools.some((t) => t.name === name))
        response.skipped.push({ tool: name, reason: 'not served' });
    }
    for (const tool of tools) {
      if (wanted && !wanted.has(tool.name)) continue;
      const name = importedToolName(server, tool.name);
      if (!TOOL_NAME_PATTERN.test(name)) {
        response.skipped.push({ tool: tool.name, reason: `${name} is not a valid tool name` });
        continue;
      }
      const definitionHash = mcpDefinitionHash(tool);
      const timeoutMs = req.timeoutMs;
      const risk = req.risk?.[tool.name];
      try {
        const registered = await this.registry.register(
          principal.tenant,
          parseRequest(RegisteredToolSchema, {
            name,
            description: (tool.description ?? tool.title ?? tool.name).slice(0, 4096),
            parameters: tool.inputSchema,
            version: `mcp-${definitionHash.slice(0, 32)}`,
            policy: {
              executor: 'mcp',
              mcp: { server, tool: tool.name, definitionHash },
              needsApproval: req.needsApproval?.[tool.name] ?? false,
              ...(risk ? { risk } : {}),
              ...(timeoutMs ? { timeoutMs } : {}),
            },
          }),
        );
        response.imported.push({
          name,
          tool: tool.name,
          contractHash: registered.contractHash,
          definitionHash,
        });
      } catch (err) {
        const message = err instanceof ToolgateError ? err.message : 'could not be registered';
        response.skipped.push({ tool: tool.name, reason: message });
      }
    }
    response.toolsetHash = this.registry.list(principal.tenant).toolsetHash;
    return response;
  }

  private async listUpstream(upstream: McpHttpUpstream) {
    const { Client, StreamableHTTPClientTransport } = mcpClientSdk();
    const client = new Client(
      { name: 'toolgate', version: '0.1.0' },
      { versionNegotiation: { mode: 'auto' } },
    );
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(upstream.url), {
          requestInit: upstream.token
            ? { headers: { authorization: `Bearer ${upstream.token}` } }
            : {},
        }),
      );
      const { tools } = await client.listTools(undefined, { cacheMode: 'bypass' });
      // Plain JSON, as the server sent it: the registry stores and hashes plain values only.
      return JSON.parse(JSON.stringify(tools)) as typeof tools;
    } catch (cause) {
      throw new ToolgateError(
        ErrorCode.Unavailable,
        `the MCP server ${upstream.name} could not be listed`,
        { cause, details: { server: upstream.name } },
      );
    } finally {
      await client.close().catch(() => undefined);
    }
  }
}
