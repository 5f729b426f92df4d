/**
 * The worktree service: isolated git worktrees per agent spawn, changes collected as patch
 * artifacts (never applied), retained trees within a pin cap, crash recovery on start.
 */
export {
  WorktreeManager,
  DEFAULT_PIN_CAP,
  type WorktreeManagerOptions,
  type AcquireCommand,
  type AcquireResult,
  type CollectCommand,
  type DisposeCommand,
  type RecoveryReport,
} from './lifecycle/worktree-manager';
export type { ArtifactPort, JournalPort, Clock } from './lifecycle/ports';
export { loadWorktreeConfig, type WorktreeConfig } from './config';
export {
  startWorktreeService,
  type WorktreeServiceOptions,
  type RunningWorktreeService,
} from './worktree.service';
export { startWorktree } from './worktree.app';
export { createObjectStoreArtifacts } from './nats/object-store-artifacts';
