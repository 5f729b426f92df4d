import { KubernetesBackend, RuncBackend, type ContainerBackend } from '@toolgate/container';
import type { ExecutorContainerConfig } from '../config';

const MIB = 1024 * 1024;

/**
 * The container backend the operator configured, or null when it is off. Opening refuses (a
 * ConfigError: runc missing — naming the Debian package —, no image directory, no cluster
 * configuration): the executor then does not start, rather than serve a `container` executor
 * that cannot run anything.
 */
export async function openContainerBackend(
  config: ExecutorContainerConfig,
): Promise<ContainerBackend | null> {
  if (config.backend === 'off') return null;
  const limits = {
    memoryBytes: config.memoryMb * MIB,
    processes: config.processes,
    cpus: config.cpus,
    tmpBytes: config.tmpMb * MIB,
  };
  if (config.backend === 'runc') {
    return RuncBackend.open({ images: config.images, stateDir: config.stateDir, limits });
  }
  return KubernetesBackend.open({
    namespace: config.namespace,
    ttlSecondsAfterFinished: config.jobTtlSeconds,
    runAsUser: config.runAsUser,
    ...(config.serviceAccount ? { serviceAccountName: config.serviceAccount } : {}),
    limits,
  });
}
