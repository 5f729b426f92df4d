import { Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import type { JournalStreamOptions } from '@toolgate/bus';
import {
  bootstrapService,
  stopOnce,
  startClean,
  startupStep,
  BusModule,
  type RunningService,
} from '@toolgate/service-kit';
import type { WorktreeConfig } from './config';
import { startWorktreeService, type RunningWorktreeService } from './worktree.service';

@Module({})
class WorktreeModule {
  static forRoot(nc: NatsConnection, subjects: Subjects): DynamicModule {
    return { module: WorktreeModule, imports: [BusModule.forRoot(nc, subjects)] };
  }
}

/**
 * The worktree service as a process: health endpoints (Nest), then the framework-free lifecycle
 * and its request handlers on the same connection. Stops answering before the connection drains.
 */
export async function startWorktree(options: {
  config: WorktreeConfig;
  streams?: JournalStreamOptions;
  logger?: false;
}): Promise<RunningService & { worktree: RunningWorktreeService }> {
  const { config } = options;
  return startClean(async (opened) => {
    const service = opened.add(
      await bootstrapService({
        name: 'worktree',
        nats: config,
        prefix: config.prefix,
        port: config.port,
        host: config.host,
        usesJournal: true,
        requiredStreams: (s) => [`OBJ_${s.artifactsBucket}`],
        ...(options.logger === false ? { logger: false } : {}),
        module: (nc, subjects) => WorktreeModule.forRoot(nc, subjects),
      }),
      (s) => s.stop(),
    );
    const worktree = await startupStep('starting the worktree lifecycle', () =>
      startWorktreeService({
        nc: service.nc,
        subjects: service.subjects,
        keys: service.keys,
        root: config.root,
        pinCap: config.pinCap,
        keepOnError: config.keepOnError,
        ...(config.repo ? { repo: config.repo } : {}),
        ...(config.allowedRepos ? { allowedRepos: config.allowedRepos } : {}),
        // As bootstrapService gives every other service: the configured replicas unless overridden.
        streams: options.streams ?? { replicas: config.streamReplicas },
      }),
    );
    const stop = service.stop;
    return {
      ...service,
      worktree,
      stop: stopOnce(async () => {
        await worktree.stop();
        await stop();
      }),
    };
  });
}
