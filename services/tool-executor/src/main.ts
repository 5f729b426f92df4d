import { createSubjects } from '@toolgate/contracts';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import { PolicyStore } from '@toolgate/registry';
import { runUntilSignalled, connectNats } from '@toolgate/service-kit';
import { loadExecutorConfig, SANDBOX_OFF_WARNING } from './config';
import { startToolExecutor } from './tool-executor.service';

void runUntilSignalled('tool-executor', async () => {
  const config = loadExecutorConfig(process.env);
  if (config.sandbox.mode === 'off') console.warn(SANDBOX_OFF_WARNING);
  const nc = await connectNats(config, 'toolgate-tool-executor-policy');
  const subjects = createSubjects(config.prefix);
  const runtime = new PolicyRuntime(
    await PolicyStore.open(nc, subjects, { replicas: config.streamReplicas }),
    nc,
    subjects,
  );
  const service = await startToolExecutor({
    config,
    checkDomain: (call, host) => runtime.checkFetchHost(call.tenant, call.profile, host, call.tool),
    protectedPaths: (call) => runtime.protectedPaths(call.tenant, call.profile),
  });
  return {
    async stop() {
      await service.stop();
      await nc.drain();
    },
  };
});
