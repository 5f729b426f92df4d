import { Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  McpListToolsOkReplySchema,
  QueryOperation,
  ServiceIdentity,
  type Subjects,
} from '@toolgate/contracts';
import { ErrorStreaks, JournalPublisher, requestReply, serviceKeysOf } from '@toolgate/bus';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import type { PolicyStore, ToolRegistry } from '@toolgate/registry';
import { BusModule, Metrics } from '@toolgate/service-kit';
import { GatewayApi } from './api/gateway-api';
import { GatewayMetrics } from './api/gateway-metrics';
import { JournalQueries } from './api/journal-queries';
import { ApprovalResolver } from './approvals/approval-resolver';
import { ApprovalLinkController } from './http/approval-link.controller';
import { GATEWAY_LINKS } from './http/approval-link.settings';
import { TokenAuth } from './auth/token-auth';
import type { GatewayConfig } from './config';
import {
  DispatchSubmitter,
  recordedDispatch,
  type ProjectedDispatch,
} from './dispatch/dispatch-submitter';
import { ApprovalEventsController } from './http/approval-events.controller';
import { ConsoleController } from './http/console.controller';
import { GatewayController } from './http/gateway.controller';
import { PolicyWhatIfController } from './http/policy-whatif.controller';
import { PolicyGate } from './policy/policy-gate';
import { ScriptInstaller } from './scripts/script-installer';
import { PolicyWhatIf } from './policy/policy-whatif';
import { McpImporter } from './mcp/mcp-importer';

@Module({})
export class GatewayModule {
  static forRoot(
    nc: NatsConnection,
    subjects: Subjects,
    config: GatewayConfig,
    registry: ToolRegistry,
    policies: PolicyStore,
  ): DynamicModule {
    return {
      module: GatewayModule,
      imports: [BusModule.forRoot(nc, subjects)],
      // Order matters: express tries routes in registration order, and `GET /v1/approvals/events`
      // must be matched before `GET /v1/approvals/:key` would take "events" for a key.
      controllers: [
        ApprovalEventsController,
        ApprovalLinkController,
        GatewayController,
        PolicyWhatIfController,
        ConsoleController,
      ],
      providers: [
        {
          provide: GATEWAY_LINKS,
          useValue: { secret: config.links.secret, identity: config.links.identity },
        },
        {
          provide: GatewayMetrics,
          inject: [Metrics],
          useFactory: (metrics: Metrics) => new GatewayMetrics(metrics),
        },
        {
          // A provider of its own so the gateway's stop can close its outcome subscriptions.
          provide: DispatchSubmitter,
          inject: [JournalPublisher, GatewayMetrics, Metrics],
          useFactory: (
            publisher: JournalPublisher,
            metrics: GatewayMetrics,
            serviceMetrics: Metrics,
          ) => {
            const queries = new JournalQueries(
              nc,
              subjects,
              config.requestTimeoutMs,
              serviceKeysOf(nc),
            );
            return new DispatchSubmitter(nc, subjects, publisher, registry, {
              waitDefaultMs: config.waitDefaultMs,
              now: () => new Date(),
              onSubmitted: (status, tenant, tool) => metrics.recordSubmission(status, tenant, tool),
              onUntrusted: serviceMetrics.untrustedCounter('wait'),
              // A resubmission past the stream's retention is answered from the projection.
              recorded: async (tenant, dispatchId) => {
                try {
                  const found = await queries.ask<{ dispatch: ProjectedDispatch }>(
                    QueryOperation.GetDispatch,
                    tenant,
                    { dispatchId },
                  );
                  return recordedDispatch(found.dispatch);
                } catch (err) {
                  if ((err as { code?: unknown }).code === ErrorCode.NotFound) return null;
                  throw err;
                }
              },
            });
          },
        },
        {
          provide: GatewayApi,
          inject: [JournalPublisher, DispatchSubmitter, GatewayMetrics, Metrics],
          useFactory: (
            publisher: JournalPublisher,
            submitter: DispatchSubmitter,
            metrics: GatewayMetrics,
            serviceMetrics: Metrics,
          ) => {
            const now = () => new Date();
            const queries = new JournalQueries(
              nc,
              subjects,
              config.requestTimeoutMs,
              serviceKeysOf(nc),
            );
            return new GatewayApi(
              new TokenAuth(config.tokens),
              registry,
              policies,
              new PolicyGate(new PolicyRuntime(policies, nc, subjects), registry),
              submitter,
              new ApprovalResolver(nc, subjects, publisher, queries, now),
              queries,
              new ErrorStreaks(publisher, now),
              new ScriptInstaller(registry, publisher, now),
              new PolicyWhatIf(
                nc,
                subjects,
                publisher.keys,
                1,
                serviceMetrics.untrustedCounter('whatif'),
              ),
              new McpImporter(config.mcpUpstreams, registry, (request) =>
                requestReply(nc, subjects.mcpListTools, request, {
                  ok: McpListToolsOkReplySchema,
                  // Starting a stdio server (sandbox, runtime, connect) comes first.
                  timeoutMs: Math.max(config.requestTimeoutMs, 45_000),
                  peer: 'the tool-executor',
                  sign: { keys: serviceKeysOf(nc), responder: ServiceIdentity.Executor },
                }).then((reply) => reply.data.tools),
              ),
              config.traceUrlTemplate,
              metrics,
            );
          },
        },
      ],
    };
  }
}
