import type { JournalStreamOptions } from '@toolgate/bus';
import { PolicyStore, ToolRegistry } from '@toolgate/registry';
import {
  bootstrapService,
  stopOnce,
  startClean,
  startupStep,
  type RunningService,
  connectNats,
  NATS_CONNECTION,
} from '@toolgate/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { createSubjects, HTTP_ROUTES } from '@toolgate/contracts';
import { GatewayApi } from './api/gateway-api';
import { serveNatsApi } from './api/nats-api.responder';
import { GatewayModule } from './app.module';
import type { GatewayConfig } from './config';
import { DispatchSubmitter } from './dispatch/dispatch-submitter';
import { ApprovalNotifier } from './approvals/approval-notifier';
import { HttpErrorFilter } from './http/error.filter';
import { ApprovalEventsController } from './http/approval-events.controller';
import { json, type NextFunction, type Request, type Response } from 'express';
import { JournalPublisher, serviceKeysOf } from '@toolgate/bus';
import { DispatchCanceller } from './dispatch/dispatch-canceller';
import type { McpEdge } from './mcp/mcp-edge';
import type { McpNodeHandler } from './mcp/mcp-node-handler';
import { MCP_PATH, PROTECTED_RESOURCE_PATH } from './mcp/mcp-paths';
import { ConsumedStates } from './mcp/parked-call-state';

/** What the MCP edge reports as its server version. */
const GATEWAY_VERSION = '0.1.0';

/** The body limit of the script install route: a 256 KiB script as JSON, with room for escapes. */
const SCRIPT_BODY_LIMIT = 2 * 1024 * 1024;

/** Starts the gateway: HTTP API, the same operations over NATS request/reply, tool registry and policies. */
export async function startGateway(options: {
  config: GatewayConfig;
  streams?: JournalStreamOptions;
  logger?: false;
}): Promise<RunningService> {
  const { config } = options;
  return startClean(async (opened) => {
    const kvConnection = opened.add(
      await startupStep('connecting to NATS for the registry', () =>
        connectNats(config, 'toolgate-gateway-kv'),
      ),
      (nc) => nc.close(),
    );
    const subjects = createSubjects(config.prefix, { journalPartitions: config.journalPartitions });
    const registry = opened.add(
      await startupStep('opening the tool registry', () =>
        ToolRegistry.open(kvConnection, subjects, { replicas: config.streamReplicas }),
      ),
      (r) => r.stop(),
    );
    const policies = opened.add(
      await startupStep('opening the policy store', () =>
        PolicyStore.open(kvConnection, subjects, { replicas: config.streamReplicas }),
      ),
      (p) => p.stop(),
    );
    const consumed = await startupStep('opening the MCP state ledger', () =>
      ConsumedStates.open(kvConnection, subjects, {
        ttlMs: config.mcp.stateTtlSeconds * 1000,
        replicas: config.streamReplicas,
      }),
    );
    let mcp: McpEdge | undefined;
    const service = opened.add(
      await bootstrapService({
        name: 'gateway',
        nats: config,
        metrics: config.metrics,
        prefix: config.prefix,
        port: config.port,
        host: config.host,
        // It appends every submission to the journal: without the stream, not ready.
        usesJournal: true,
        requiredStreams: (s) => [
          `KV_${s.toolsBucket}`,
          `KV_${s.policyBucket}`,
          `KV_${s.mcpStateBucket}`,
        ],
        ...(options.streams ? { streams: options.streams } : {}),
        ...(options.logger === false ? { logger: false } : {}),
        module: (nc, s) => GatewayModule.forRoot(nc, s, config, registry, policies),
        sideConnections: [{ name: 'nats-kv', nc: kvConnection }],
        configure: (app) => {
          // A script may be 256 KiB, over the 100 KB every other body gets: this route alone
          // parses more (registered before Nest's own parser, which then leaves the parsed body
          // alone). Wrapped, because Nest skips its global JSON parser when it finds a middleware
          // named `jsonParser`.
          const scriptBodies = json({ limit: SCRIPT_BODY_LIMIT });
          app.use(HTTP_ROUTES.listScripts.path, (req: Request, res: Response, next: NextFunction) =>
            scriptBodies(req, res, next),
          );
          app.useGlobalFilters(new HttpErrorFilter());
          // The MCP edge: a web-standard handler of the SDK's, adapted once for express. Mounted
          // before Nest's body parser (the SDK reads and bounds the body itself) and matched on
          // the full path, so express strips no mount prefix from the request's URL. Made at the
          // first MCP request: loading the SDK costs ~0.1 CPU-s, which a gateway that serves no
          // MCP client (and every test stack that calls none) never pays.
          let serveMcp: McpNodeHandler['serve'] | undefined;
          const mcpHandler = () => {
            if (serveMcp) return serveMcp;
            const { mcpNodeHandler } =
              // eslint-disable-next-line @typescript-eslint/no-require-imports
              require('./mcp/mcp-node-handler') as typeof import('./mcp/mcp-node-handler');
            const handler = mcpNodeHandler({
              api: app.get(GatewayApi),
              registry,
              publisher: app.get(JournalPublisher),
              consumed,
              canceller: new DispatchCanceller(
                app.get<NatsConnection>(NATS_CONNECTION),
                subjects,
                serviceKeysOf(app.get<NatsConnection>(NATS_CONNECTION)),
              ),
              ...config.mcp,
              version: GATEWAY_VERSION,
            });
            mcp = handler.edge;
            serveMcp = handler.serve;
            return serveMcp;
          };
          app.use((req: Request, res: Response, next: NextFunction) => {
            const path = req.path;
            if (path === MCP_PATH || path.startsWith(PROTECTED_RESOURCE_PATH)) {
              mcpHandler()(req, res);
              return;
            }
            next();
          });
        },
      }),
      (s) => s.stop(),
    );
    const natsApi = serveNatsApi(service.nc, service.subjects, service.app.get(GatewayApi));
    // The API's subscriptions reach the broker before the gateway says it has started: a bus
    // request sent at once got "no responders" (2 of 3 fresh stacks, in a red-team run).
    await service.nc.flush();
    const submitter = service.app.get(DispatchSubmitter);
    const api = service.app.get(GatewayApi);
    const notifier = config.webhooks
      ? new ApprovalNotifier(
          service.nc,
          service.subjects,
          config.tokens.map((t) => t.tenant),
          api.approvals,
          {
            ...config.webhooks,
            linkSecret: config.links.secret,
            publicUrl: config.links.publicUrl,
            linkTtlMs: config.links.ttlMs,
          },
          () => new Date(),
        )
      : null;
    notifier?.start();
    const stop = service.stop;
    return {
      ...service,
      stop: stopOnce(async () => {
        // First, so submissions waiting for an outcome answer now with the state they have instead of
        // holding the NATS responder's and the HTTP server's shutdown for the rest of their wait.
        submitter.stop();
        await mcp?.close();
        await notifier?.stop();
        // Open consoles' live streams end with a message rather than hold the HTTP server's close.
        service.app.get(ApprovalEventsController).endStreams();
        await natsApi.stop();
        await stop();
        registry.stop();
        policies.stop();
        await kvConnection.drain();
      }),
    };
  });
}
