import { createSubjects } from '@toolgate/contracts';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import { PolicyStore } from '@toolgate/registry';
import { connectNats, runUntilSignalled, startClean, startupStep } from '@toolgate/service-kit';
import { loadExecutorConfig, SANDBOX_OFF_WARNING } from './config';
import { startToolExecutor } from './tool-executor.service';

void runUntilSignalled('tool-executor', () =>
  startClean(async (opened) => {
    const config = loadExecutorConfig(process.env);
    if (config.sandbox.mode === 'off') console.warn(SANDBOX_OFF_WARNING);
    const nc = opened.add(
      await startupStep('connecting to NATS for the policy store', () =>
        connectNats(config, 'toolgate-tool-executor-policy'),
      ),
      (c) => c.close(),
    );
    const subjects = createSubjects(config.prefix);
    const store = opened.add(
      await startupStep('opening the policy store', () =>
        PolicyStore.open(nc, subjects, { replicas: config.streamReplicas }),
      ),
      (s) => s.stop(),
    );
    const runtime = new PolicyRuntime(store, nc, subjects);
    const service = await startToolExecutor({
      config,
      checkDomain: (call, host) =>
        runtime.checkFetchHost(call.tenant, call.profile, host, call.tool),
      protectedPaths: (call) => runtime.protectedPaths(call.tenant, call.profile),
      decideHostCall: async (call, tool, input) =>
        (
          await runtime.decide(call.tenant, {
            tool,
            input,
            agent: call.agent,
            isolation: call.isolation,
            profile: call.profile,
          })
        ).decision,
    });
    return {
      inFlight: () => service.inFlight(),
      async stop() {
        await service.stop();
        store.stop();
        await nc.drain();
      },
    };
  }),
);
