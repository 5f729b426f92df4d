import type { NatsConnection } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import {
  ServiceIdentity,
  WorktreeAcquiredReplySchema,
  type ServiceKeys,
  type Subjects,
  type WorktreeAcquireRequest,
} from '@toolgate/contracts';
import type { CwdResolver } from './tool-runner';

/**
 * The working directory for a call: the pinned cwd under isolation `none`/`readonly`; under
 * worktree isolation, the agent's worktree, acquired (idempotently) from the worktree service.
 * Request and reply are the contracts' worktree acquire definitions; the request is signed with the
 * executor's keys for the worktree service, which acquires trees for nobody else.
 */
export function worktreeCwdResolver(
  nc: NatsConnection,
  subjects: Subjects,
  pinnedCwd: string,
  timeoutMs: number,
  keys: ServiceKeys,
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
    const reply = await requestReply(nc, subjects.worktree('acquire'), request, {
      ok: WorktreeAcquiredReplySchema,
      timeoutMs,
      peer: 'the worktree service',
      sign: { keys, responder: ServiceIdentity.Worktree },
    });
    return reply.path;
  };
}
