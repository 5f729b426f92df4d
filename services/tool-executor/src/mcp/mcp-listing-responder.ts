import type { NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  McpListToolsRequestSchema,
  requestSigningOf,
  ToolgateError,
  type McpListToolsReply,
  type McpStdioUpstream,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import { metricsFor, serveRequests, type ServedEndpoints } from '@toolgate/service-kit';
import type { StdioUpstreams } from './stdio-upstreams';

/** How long a listing may take once the server runs. */
const LIST_TIMEOUT_MS = 30_000;

/**
 * Answers `subjects.mcpListTools`: the tools a stdio upstream serves to a tenant, listed by the
 * same sandboxed process the calls go to, so an import pins exactly what the executor will check
 * before each call. Only requests the gateway signed are answered (it takes the tenant from an
 * admin's verified token); replicas share a queue group.
 */
export function serveMcpListing(
  nc: NatsConnection,
  subjects: Subjects,
  keys: ServiceKeys,
  upstreams: readonly McpStdioUpstream[],
  pool: StdioUpstreams,
): ServedEndpoints {
  const byName = new Map(upstreams.map((u) => [u.name, u]));
  const subject = subjects.mcpListTools;
  return serveRequests(
    nc,
    `${subjects.prefix}-executor-mcp`,
    [
      {
        subject,
        signedBy: requestSigningOf(subjects, subject).requesters,
        async handle(body): Promise<McpListToolsReply> {
          const request = McpListToolsRequestSchema.parse(body);
          const upstream = byName.get(request.server);
          if (!upstream || !upstream.tenants.includes(request.tenant)) {
            throw new ToolgateError(
              ErrorCode.NotFound,
              `no stdio MCP server ${request.server} is configured for this tenant`,
              { details: { server: request.server } },
            );
          }
          const client = await pool.client(upstream, request.tenant);
          try {
            const { tools } = await client.listTools(undefined, {
              cacheMode: 'bypass',
              timeout: LIST_TIMEOUT_MS,
            });
            // Plain JSON, as the server sent it: the registry stores and hashes plain values only.
            return { tools: JSON.parse(JSON.stringify(tools)) as McpListToolsReply['tools'] };
          } catch (cause) {
            if (typeof (cause as { code?: unknown })?.code !== 'number') {
              await pool.drop(upstream, request.tenant);
            }
            throw new ToolgateError(
              ErrorCode.Unavailable,
              `the MCP server ${upstream.name} could not be listed`,
              { cause, retryable: true, details: { server: upstream.name } },
            );
          }
        },
      },
    ],
    { keys, onUntrusted: metricsFor(nc).untrustedCounter('request') },
  );
}
