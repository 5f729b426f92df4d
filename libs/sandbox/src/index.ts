export {
  Sandbox,
  DEFAULT_PROTECTED_PATHS,
  type LongLivedRequest,
  type SandboxRequest,
  type SandboxSettings,
} from './sandbox';
export {
  bwrapArgv,
  SANDBOX_TMP,
  type HostEntry,
  type HostLayout,
  type SandboxPlan,
} from './bwrap-argv';
export { EGRESS_ENV, EGRESS_MAX_CONNECTIONS, EGRESS_PORT, EGRESS_SOCKET } from './egress-bridge';
export { findExecutable, probeHostLayout } from './host-layout';
export {
  DEFAULT_LIMITS,
  effectiveLimits,
  prlimitArgv,
  type ResourceLimits,
} from './resource-limits';
export {
  descendants,
  procStat,
  runProcess,
  type ProcessRequest,
  type ProcessResult,
} from './process-runner';
export { CappedBuffer } from './capped-buffer';
export { MemoryCgroup, PidsCgroup } from './pids-cgroup';
export { launcherArgv, LAUNCHER_ENV } from './launcher-argv';
export { SandboxedProcess } from './long-lived-process';
export {
  openProtectedMounts,
  openScopeMounts,
  resolveProtectedMounts,
  scopeMoved,
  type ProtectedMounts,
} from './protected-mounts';
