import type { NatsConnection } from '@nats-io/transport-node';
import { fromWireError, isWireError, type Subjects } from '@toolgate/contracts';
import type { CwdResolver } from './tool-runner';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The working directory for a call: the pinned cwd under isolation `none`/`readonly`; under
 * worktree isolation, the agent's worktree, acquired (idempotently) from the worktree service.
 */
export function worktreeCwdResolver(
  nc: NatsConnection,
  subjects: Subjects,
  pinnedCwd: string,
  timeoutMs: number,
): CwdResolver {
  return async (call) => {
    if (typeof call.isolation !== 'object') return pinnedCwd;
    const request = {
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
    const body = JSON.parse(decoder.decode(reply.data)) as {
      ok?: boolean;
      data?: { path?: unknown };
      path?: unknown;
      error?: unknown;
    };
    if (body.ok === false)
      throw isWireError(body.error)
        ? fromWireError(body.error)
        : new Error('worktree acquire failed');
    const path = body.data?.path ?? body.path;
    if (typeof path !== 'string') throw new Error('worktree acquire replied without a path');
    return path;
  };
}
