import { z } from 'zod';
import { canonicalDigest } from './canonical-json';
import { ConfigError } from './errors';

/**
 * MCP servers behind Toolgate (`executor: "mcp"`). An admin imports an upstream server's tools:
 * each becomes a registered tool `<server>__<tool>` whose contract (description, parameters, and
 * a version naming the definition's digest) is what policies and approvals bind to, and whose
 * policy records {@link McpBinding}. The executor checks, before every call, that the upstream
 * still serves the definition with that digest; any change (description, schemas, annotations)
 * refuses the call with `contract-drift` until an admin imports the tool again.
 */

/** An upstream server's name: one token of `<server>__<tool>`. */
export const McpServerNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9-]{1,32}$/, 'MCP server names are 1-32 characters of [A-Za-z0-9-]');

export const McpBindingSchema = z.strictObject({
  server: McpServerNameSchema,
  /** The tool's name on the upstream server. */
  tool: z.string().min(1).max(128),
  /** {@link mcpDefinitionHash} of the definition an admin approved. */
  definitionHash: z.string().regex(/^[0-9a-f]{64}$/),
});
export type McpBinding = z.infer<typeof McpBindingSchema>;

const TenantsSchema = z.array(z.string().regex(/^[A-Za-z0-9_-]{1,128}$/)).min(1);

/**
 * An upstream MCP server reached over Streamable HTTP, as the deployment configures it
 * (`TOOLGATE_MCP_UPSTREAMS`, read by the gateway to import and by the tool-executor to call):
 * where it is, which tenants may import it, and Toolgate's own credential for it. A caller's token
 * never goes upstream.
 */
export const McpHttpUpstreamSchema = z.strictObject({
  name: McpServerNameSchema,
  /** Streamable HTTP endpoint. */
  url: z.url(),
  /** Tenants that may import and call it. */
  tenants: TenantsSchema,
  /** Toolgate's bearer token for this server (a secret: never logged, never in an error). */
  token: z.string().min(1).optional(),
});
export type McpHttpUpstream = z.infer<typeof McpHttpUpstreamSchema>;

/**
 * How a stdio upstream is started: a command the tool-executor runs in its sandbox (bubblewrap)
 * and talks MCP to over stdin/stdout. Operator configuration, visible to whoever reads it: `env`
 * is the server's whole environment besides `PATH`, `HOME` and `TMPDIR` (nothing of Toolgate's).
 */
export const McpStdioCommandSchema = z.strictObject({
  /** The program and its arguments, never a shell string; `argv[0]` is found inside the sandbox. */
  argv: z.array(z.string().min(1).max(4096)).min(1).max(64),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/), z.string().max(8192))
    .optional(),
  /**
   * The server's scope: a host directory it may read and write (its working directory). Unset: an
   * empty directory of its own, removed when the process stops.
   */
  cwd: z.string().startsWith('/').optional(),
  /** Share the host's network. Default false: loopback only, of its own. */
  network: z.boolean().optional(),
  /** Lower limits than the executor's sandbox maxima (they can only lower them). */
  limits: z
    .strictObject({
      cpuSeconds: z.number().int().positive().optional(),
      memoryMb: z.number().int().min(16).optional(),
      processes: z.number().int().min(2).optional(),
      openFiles: z.number().int().min(16).optional(),
    })
    .optional(),
});
export type McpStdioCommand = z.infer<typeof McpStdioCommandSchema>;

/** An upstream MCP server the tool-executor starts itself (stdio transport, in the sandbox). */
export const McpStdioUpstreamSchema = z.strictObject({
  name: McpServerNameSchema,
  command: McpStdioCommandSchema,
  /** Tenants that may import and call it; each tenant gets a process of its own. */
  tenants: TenantsSchema,
});
export type McpStdioUpstream = z.infer<typeof McpStdioUpstreamSchema>;

/** An upstream MCP server: Streamable HTTP (`url`) or stdio in the sandbox (`command`). */
export const McpUpstreamSchema = z.union([McpHttpUpstreamSchema, McpStdioUpstreamSchema]);
export type McpUpstream = z.infer<typeof McpUpstreamSchema>;
export const McpUpstreamsSchema = z.array(McpUpstreamSchema);

/** Whether `upstream` is started by the tool-executor over stdio. */
export function isStdioUpstream(upstream: McpUpstream): upstream is McpStdioUpstream {
  return 'command' in upstream;
}

/**
 * `subjects.mcpListTools` (gateway → tool-executor, signed, request/reply): the tools a stdio
 * upstream serves for a tenant, listed by the executor's own process of it, so an import pins the
 * definitions the executor will check. Answered `{ ok: true, data: McpListToolsReply }`.
 */
export const McpListToolsRequestSchema = z.strictObject({
  tenant: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/),
  server: McpServerNameSchema,
});
export type McpListToolsRequest = z.infer<typeof McpListToolsRequestSchema>;

export const McpListToolsReplySchema = z.object({
  tools: z
    .array(
      z.looseObject({
        name: z.string(),
        title: z.string().optional(),
        description: z.string().optional(),
        inputSchema: z.unknown(),
        outputSchema: z.unknown().optional(),
        annotations: z.unknown().optional(),
      }),
    )
    .max(10_000),
});
export type McpListToolsReply = z.infer<typeof McpListToolsReplySchema>;
/** The whole successful reply on the wire (`serveRequests`' envelope). */
export const McpListToolsOkReplySchema = z.object({
  ok: z.literal(true),
  data: McpListToolsReplySchema,
});

/** The definition fields an upstream tool is pinned by: every field a model or client reads. */
export interface McpToolDefinition {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  inputSchema: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

/** sha256 over the canonical JSON of an upstream tool's definition (absent fields stay absent). */
export function mcpDefinitionHash(tool: McpToolDefinition): string {
  const pinned: Record<string, unknown> = { name: tool.name, inputSchema: tool.inputSchema };
  for (const key of ['title', 'description', 'outputSchema', 'annotations'] as const) {
    if (tool[key] !== undefined) pinned[key] = tool[key];
  }
  // A definition comes off the wire through a client library: its objects need not be plain
  // (null prototypes), and only their JSON is what the server said.
  return canonicalDigest(['toolgate.mcp-tool.v1', JSON.parse(JSON.stringify(pinned))]);
}

/** The name an imported tool is registered under. */
export function importedToolName(server: string, tool: string): string {
  return `${server}__${tool}`;
}

/**
 * Parses `TOOLGATE_MCP_UPSTREAMS` (a JSON array of {@link McpUpstream}); unset is none. A bad value
 * is a {@link ConfigError} naming the paths at fault, never the values (tokens are secrets).
 */
export function parseMcpUpstreams(raw: string | undefined): McpUpstream[] {
  if (raw === undefined || raw.trim() === '') return [];
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new ConfigError('TOOLGATE_MCP_UPSTREAMS is not valid JSON', {
      details: { field: 'TOOLGATE_MCP_UPSTREAMS' },
    });
  }
  const parsed = McpUpstreamsSchema.safeParse(json);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`TOOLGATE_MCP_UPSTREAMS is invalid: ${where}`, {
      details: { field: 'TOOLGATE_MCP_UPSTREAMS' },
    });
  }
  const names = new Set<string>();
  for (const upstream of parsed.data) {
    if (names.has(upstream.name)) {
      throw new ConfigError(`TOOLGATE_MCP_UPSTREAMS names ${upstream.name} twice`, {
        details: { field: 'TOOLGATE_MCP_UPSTREAMS' },
      });
    }
    names.add(upstream.name);
  }
  return parsed.data;
}
