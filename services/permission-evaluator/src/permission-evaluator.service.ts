import { createSubjects } from '@toolgate/contracts';
import type { JournalStreamOptions } from '@toolgate/bus';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import { PolicyStore } from '@toolgate/registry';
import {
  bootstrapService,
  stopOnce,
  settlePoisoned,
  startClean,
  startupStep,
  type RunningService,
  connectNats,
} from '@toolgate/service-kit';
import { PermissionEvaluatorModule } from './app.module';
import type { EvaluatorConfig } from './config';

/** Starts the permission-evaluator: the tenant policies (hot-reloaded) and its consumer on `requested`. */
export async function startPermissionEvaluator(options: {
  config: EvaluatorConfig;
  streams?: JournalStreamOptions;
  logger?: false;
}): Promise<RunningService> {
  const { config } = options;
  return startClean(async (opened) => {
    // The policy mirror has its own connection: it must be up before the consumer starts deciding.
    const kvConnection = opened.add(
      await startupStep('connecting to NATS for the policy store', () =>
        connectNats(config, 'toolgate-permission-evaluator-kv'),
      ),
      (nc) => nc.close(),
    );
    const subjects = createSubjects(config.prefix, { journalPartitions: config.journalPartitions });
    const store = opened.add(
      await startupStep('opening the policy store', () =>
        PolicyStore.open(kvConnection, subjects, { replicas: config.streamReplicas }),
      ),
      (s) => s.stop(),
    );
    let runtime: PolicyRuntime | undefined;
    const service = await bootstrapService({
      name: 'permission-evaluator',
      nats: config,
      prefix: config.prefix,
      port: config.port,
      host: config.host,
      requiredStreams: (s) => [`KV_${s.policyBucket}`],
      sideConnections: [{ name: 'nats-kv', nc: kvConnection }],
      ...(options.streams ? { streams: options.streams } : {}),
      ...(options.logger === false ? { logger: false } : {}),
      module: (nc, s) => {
        runtime = new PolicyRuntime(store, nc, s);
        return PermissionEvaluatorModule.forRoot(nc, s, runtime);
      },
      transport: {
        role: 'evaluator',
        handlers: {
          requested: {
            concurrency: config.concurrency,
            maxDeliver: config.maxDeliver,
            ackWaitMs: config.ackWaitMs,
            maxAckPending: config.maxAckPending,
          },
        },
        onPoison: settlePoisoned,
      },
    });
    const stop = service.stop;
    return {
      ...service,
      stop: stopOnce(async () => {
        await stop();
        store.stop();
        await kvConnection.drain();
      }),
    };
  });
}
