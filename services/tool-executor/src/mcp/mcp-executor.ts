import type { Client } from '@modelcontextprotocol/client';
import {
  ErrorCode,
  isStdioUpstream,
  MAX_JSON_DEPTH,
  mcpDefinitionHash,
  withinJsonDepth,
  type McpHttpUpstream,
  type McpUpstream,
} from '@toolgate/contracts';
import { mcpClientSdk } from './mcp-client-sdk';
import type { ToolRunOutcome } from '@toolgate/tools';
import {
  abortedError,
  failedOutcome,
  type CallExecutor,
  type CallRun,
} from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import { decidedTool, type CommandToolOptions } from '../subprocess/command-call';
import type { StdioUpstreams } from './stdio-upstreams';

/** How much of an upstream error result's text an outcome keeps. */
const MAX_ERROR_TEXT = 2048;

/**
 * Runs `mcp` tools: the call goes to the upstream MCP server the tool was imported from with the
 * official client — over Streamable HTTP carrying Toolgate's own credential for that server (from
 * `TOOLGATE_MCP_UPSTREAMS`; the caller's token is never here to pass on), or over stdio to the
 * server's long-lived process in the sandbox ({@link StdioUpstreams}). Before every call
 * the upstream's current definition of the tool is read and hashed: unless it is the definition an
 * admin approved at import (`policy.mcp.definitionHash`), the call is refused with
 * `contract-drift` and the upstream tool is not called. Upstream annotations are part of that hash
 * and nothing more: they never decide anything.
 */
export class McpExecutor implements CallExecutor {
  private readonly upstreams: ReadonlyMap<string, McpUpstream>;
  /** One connected client per HTTP upstream, dropped when a call finds it broken. */
  private readonly clients = new Map<string, Promise<Client>>();

  constructor(
    upstreams: readonly McpUpstream[],
    private readonly lookup: CommandToolOptions['lookup'],
    /** The stdio upstreams' processes; null when none is configured. */
    private readonly stdio: StdioUpstreams | null = null,
  ) {
    this.upstreams = new Map(upstreams.map((u) => [u.name, u]));
  }

  async run(call: PendingCall, run: CallRun): Promise<ToolRunOutcome> {
    const decided = await decidedTool(call, this.lookup);
    if (!decided.ok) return decided;
    const binding = decided.tool.policy.mcp;
    const upstream = binding ? this.upstreams.get(binding.server) : undefined;
    if (!binding || !upstream || !upstream.tenants.includes(call.tenant)) {
      return failedOutcome(
        ErrorCode.ExecutorUnregistered,
        `the MCP server behind ${call.tool.name} is not configured for this tenant`,
      );
    }
    const signal = run.signal;
    const where = { server: binding.server, tool: binding.tool };
    let client: Client;
    try {
      client = await this.client(upstream, call.tenant);
      const { tools } = await client.listTools(undefined, {
        cacheMode: 'refresh',
        ...(signal ? { signal } : {}),
        timeout: run.timeoutMs,
      });
      const served = tools.find((t) => t.name === binding.tool);
      const servedHash = served ? mcpDefinitionHash(served) : null;
      if (servedHash !== binding.definitionHash) {
        return failedOutcome(
          ErrorCode.ContractDrift,
          served
            ? `${binding.server} changed the definition of ${binding.tool} since it was approved: an admin must import it again`
            : `${binding.server} no longer serves ${binding.tool}: an admin must import it again`,
          { ...where, approved: binding.definitionHash, served: servedHash },
        );
      }
    } catch (err) {
      return this.failure(upstream, call.tenant, signal, err, 'listing');
    }
    try {
      const result = await client.callTool(
        { name: binding.tool, arguments: (call.input ?? {}) as Record<string, unknown> },
        { ...(signal ? { signal } : {}), timeout: run.timeoutMs },
      );
      if (result.isError) {
        const text = (result.content ?? [])
          .map((c) => (c.type === 'text' ? c.text : `[${c.type}]`))
          .join('\n')
          .slice(0, MAX_ERROR_TEXT);
        return failedOutcome(ErrorCode.ToolFailed, text || `${binding.tool} failed`, where);
      }
      const value =
        result.structuredContent !== undefined
          ? result.structuredContent
          : { content: result.content };
      // Bounded as every reply from outside is: a value thousands deep would not encode.
      if (!withinJsonDepth(value)) {
        return failedOutcome(
          ErrorCode.NonSerializableResult,
          `${binding.tool} answered with a result nested deeper than ${MAX_JSON_DEPTH} levels`,
          where,
        );
      }
      return { ok: true, result: value };
    } catch (err) {
      return this.failure(upstream, call.tenant, signal, err, 'calling');
    }
  }

  /** Closes every upstream connection and kills every stdio server. */
  async close(): Promise<void> {
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all([
      ...all.map((c) => c.then((client) => client.close()).catch(() => undefined)),
      this.stdio?.close(),
    ]);
  }

  private failure(
    upstream: McpUpstream,
    tenant: string,
    signal: AbortSignal | undefined,
    err: unknown,
    what: string,
  ): ToolRunOutcome {
    if (signal?.aborted) return { ok: false, error: abortedError(signal) };
    const code = (err as { code?: unknown })?.code;
    if (isStdioUpstream(upstream)) {
      // A JSON-RPC error is the server's answer: its process is kept. Anything else (a timeout,
      // a process that died, garbage on its stdout) leaves it in an unknown state: it is killed.
      if (typeof code !== 'number') void this.stdio?.drop(upstream, tenant);
      if (typeof code === 'string' && code === ErrorCode.Unavailable) {
        // It could not be started (or is restarting too often): the pool's words say why.
        return failedOutcome(ErrorCode.Unavailable, (err as Error).message, {
          server: upstream.name,
        });
      }
    } else {
      this.drop(upstream.name);
    }
    // Its message may name the upstream's internals; only the server's name and the code leave.
    return failedOutcome(
      ErrorCode.Unavailable,
      `${what} the tools of MCP server ${upstream.name} failed`,
      typeof code === 'number'
        ? { server: upstream.name, jsonRpcCode: code }
        : { server: upstream.name },
    );
  }

  private drop(name: string): void {
    const client = this.clients.get(name);
    this.clients.delete(name);
    void client?.then((c) => c.close()).catch(() => undefined);
  }

  private client(upstream: McpUpstream, tenant: string): Promise<Client> {
    if (isStdioUpstream(upstream)) {
      if (!this.stdio) {
        return Promise.reject(new Error('stdio MCP servers are not served without the sandbox'));
      }
      return this.stdio.client(upstream, tenant);
    }
    return this.httpClient(upstream);
  }

  private httpClient(upstream: McpHttpUpstream): Promise<Client> {
    let client = this.clients.get(upstream.name);
    if (!client) {
      client = (async () => {
        const { Client, StreamableHTTPClientTransport } = mcpClientSdk();
        const c = new Client(
          { name: 'toolgate', version: '0.1.0' },
          { versionNegotiation: { mode: 'auto' } },
        );
        await c.connect(
          new StreamableHTTPClientTransport(new URL(upstream.url), {
            requestInit: upstream.token
              ? { headers: { authorization: `Bearer ${upstream.token}` } }
              : {},
          }),
        );
        return c;
      })();
      client.catch(() => this.clients.delete(upstream.name));
      this.clients.set(upstream.name, client);
    }
    return client;
  }
}
