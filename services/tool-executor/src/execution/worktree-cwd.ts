import type { NatsConnection } from '@nats-io/transport-node';
import {
  fromWireError,
  WorktreeAcquireReplySchema,
  type Subjects,
  type WorktreeAcquireRequest,
} from '@toolgate/contracts';
import type { CwdResolver } from './tool-runner';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The working directory for a call: the pinned cwd under isolation `none`/`readonly`; under
 * worktree isolation, the agent's worktree, acquired (idempotently) from the worktree service.
 * Request and reply are the contracts' worktree acquire definitions.
 */
export function worktreeCwdResolver(
  nc: NatsConnection,
  subjects: Subjects,
  pinnedCwd: string,
  timeoutMs: number,
): CwdResolver {
  return async (call) => {
    if (typeof call.isolation !== 'object') return pinnedCwd;
    const request: WorktreeAcquireRequest = {
      tenant: call.tenant,
      runId: call.runId,
      agentKey: `${call.agent.agentType}:${call.agent.label ?? ''}`,
      ...(call.isolation.ref ? { ref: call.isolation.ref } : {}),
      causationId: call.causationId,
    };
    const reply = await nc.request(
      subjects.worktree('acquire'),
      encoder.encode(JSON.stringify(request)),
      { timeout: timeoutMs },
    );
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(reply.data));
    } catch {
      throw new Error('worktree acquire replied with something that is not JSON');
    }
    const parsed = WorktreeAcquireReplySchema.safeParse(body);
    if (!parsed.success) throw new Error('worktree acquire replied with a malformed answer');
    if (!parsed.data.ok) throw fromWireError(parsed.data.error);
    return parsed.data.path;
  };
}
