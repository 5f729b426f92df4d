import { runUntilSignalled, startClean } from '@toolgate/service-kit';
import { loadExecutorConfig, SANDBOX_OFF_WARNING } from './config';
import { openExecutorPolicy } from './executor-policy';
import { startToolExecutor } from './tool-executor.service';

void runUntilSignalled('tool-executor', () =>
  startClean(async (opened) => {
    const config = loadExecutorConfig(process.env);
    if (config.sandbox.mode === 'off') console.warn(SANDBOX_OFF_WARNING);
    const policy = await openExecutorPolicy(config, opened);
    const service = await startToolExecutor({
      config,
      ...policy.decisions,
      sideConnections: [policy.connection],
    });
    return {
      inFlight: () => service.inFlight(),
      abandon: () => service.abandon(),
      async stop() {
        await service.stop();
        await policy.close();
      },
    };
  }),
);
