import { createHash } from 'node:crypto';

/**
 * The id of an agent's tree: a content key over (tenant, runId, agentKey) and the generation, so
 * acquiring again for the same spawn finds the same tree, and a restarted agent gets a new id
 * that can never be confused with the tree it lost. It is a valid subject token.
 *
 * Shared by the worktree service, which names trees with it (`<root>/trees/<worktreeId>`), and the
 * tool-executor, which accepts no other directory for an agent's calls than the one it names.
 */
export function worktreeIdOf(
  tenant: string,
  runId: string,
  agentKey: string,
  generation: number,
): string {
  return `wt_${agentSlotOf(tenant, runId, agentKey)}_g${generation}`;
}

/** The key of an agent spawn's slot, independent of the generation. */
export function agentSlotOf(tenant: string, runId: string, agentKey: string): string {
  return createHash('sha256').update(`${tenant}\0${runId}\0${agentKey}`).digest('hex').slice(0, 24);
}
