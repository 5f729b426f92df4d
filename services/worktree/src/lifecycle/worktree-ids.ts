/**
 * The ids of agents' trees. The derivation lives in the contracts, where the tool-executor reads
 * it too (it runs a call only in the tree the ids name); the branch is the service's own.
 */
export { agentSlotOf, worktreeIdOf } from '@toolgate/contracts';

/** The branch a tree is checked out on: the service's own namespace, never a host branch. */
export function branchOf(worktreeId: string): string {
  return `toolgate/${worktreeId}`;
}
