import type { JournalStreamOptions } from '@toolgate/bus';
import { PolicyStore, ToolRegistry } from '@toolgate/registry';
import {
  bootstrapService,
  stopOnce,
  startClean,
  startupStep,
  type RunningService,
  connectNats,
} from '@toolgate/service-kit';
import { createSubjects } from '@toolgate/contracts';
import { GatewayApi } from './api/gateway-api';
import { serveNatsApi } from './api/nats-api.responder';
import { GatewayModule } from './app.module';
import type { GatewayConfig } from './config';
import { DispatchSubmitter } from './dispatch/dispatch-submitter';
import { HttpErrorFilter } from './http/error.filter';

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
    const subjects = createSubjects(config.prefix);
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
    const service = opened.add(
      await bootstrapService({
        name: 'gateway',
        nats: config,
        prefix: config.prefix,
        port: config.port,
        host: config.host,
        ...(options.streams ? { streams: options.streams } : {}),
        ...(options.logger === false ? { logger: false } : {}),
        module: (nc, s) => GatewayModule.forRoot(nc, s, config, registry, policies),
        configure: (app) => {
          app.useGlobalFilters(new HttpErrorFilter());
        },
      }),
      (s) => s.stop(),
    );
    const natsApi = serveNatsApi(service.nc, service.subjects, service.app.get(GatewayApi));
    const submitter = service.app.get(DispatchSubmitter);
    const stop = service.stop;
    return {
      ...service,
      stop: stopOnce(async () => {
        // First, so submissions waiting for an outcome answer now with the state they have instead of
        // holding the NATS responder's and the HTTP server's shutdown for the rest of their wait.
        submitter.stop();
        await natsApi.stop();
        await stop();
        registry.stop();
        policies.stop();
        await kvConnection.drain();
      }),
    };
  });
}
