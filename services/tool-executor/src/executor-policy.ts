import { createSubjects } from '@toolgate/contracts';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import { PolicyStore } from '@toolgate/registry';
import {
  connectNats,
  startupStep,
  type OpenedResources,
  type SideConnection,
} from '@toolgate/service-kit';
import type { ExecutorConfig } from './config';
import type { ToolExecutorOptions } from './tool-executor.service';

/** The executor's per-call policy decisions, as {@link startToolExecutor} takes them. */
export type ExecutorPolicyDecisions = Required<
  Pick<ToolExecutorOptions, 'checkDomain' | 'protectedPaths' | 'decideHostCall'>
>;

/**
 * Opens the policy the executor decides each call with: the policy store, on a NATS connection of
 * its own, and a `PolicyRuntime` over it, answering the domain rules (http_fetch, command tools'
 * network), the protected paths and the chain's decision on a script's host call for the call's
 * tenant and profile. What it opens is recorded in `opened` (a failed start-up closes it); `close`
 * stops it after the executor has stopped. `connection` is for the executor's /readyz.
 */
export async function openExecutorPolicy(
  config: ExecutorConfig,
  opened: OpenedResources,
): Promise<{
  decisions: ExecutorPolicyDecisions;
  connection: SideConnection;
  close(): Promise<void>;
}> {
  const nc = opened.add(
    await startupStep("connecting to NATS for the executor's policy store", () =>
      connectNats(config, 'toolgate-tool-executor-policy'),
    ),
    (c) => c.close(),
  );
  const subjects = createSubjects(config.prefix, { journalPartitions: config.journalPartitions });
  const store = opened.add(
    await startupStep("opening the executor's policy store", () =>
      PolicyStore.open(nc, subjects, { replicas: config.streamReplicas }),
    ),
    (s) => s.stop(),
  );
  const runtime = new PolicyRuntime(store, nc, subjects);
  return {
    connection: { name: 'nats-kv', nc },
    decisions: {
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
    },
    async close() {
      store.stop();
      await nc.drain();
    },
  };
}
