import { Sandbox } from '@toolgate/sandbox';
import type { ExecutorSandboxConfig } from '../config';

const MIB = 1024 * 1024;

/**
 * The executor's sandbox from its configuration, or null when the operator turned it off. Opening
 * refuses (a ConfigError naming the Debian package) when bubblewrap is missing or cannot start
 * here: the executor then does not start, rather than run tools on the host.
 */
export async function openExecutorSandbox(config: ExecutorSandboxConfig): Promise<Sandbox | null> {
  if (config.mode === 'off') return null;
  return Sandbox.open({
    readOnlyPaths: config.readOnlyPaths,
    limits: {
      cpuSeconds: config.cpuSeconds,
      addressSpaceBytes: config.memoryMb * MIB,
      openFiles: config.openFiles,
      processes: config.processes,
    },
    tmpBytes: config.tmpMb * MIB,
    ...(config.shmMb ? { shmBytes: config.shmMb * MIB } : {}),
    ...(config.pidsCgroup ? { pidsCgroup: config.pidsCgroup } : {}),
    ...(config.memoryCgroup ? { memoryCgroup: config.memoryCgroup } : {}),
  });
}
