import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import {
  ErrorCode,
  ServiceIdentity,
  ToolgateError,
  WorktreeAcquiredReplySchema,
  worktreeIdOf,
  type ServiceKeys,
  type Subjects,
  type WorktreeAcquireRequest,
} from '@toolgate/contracts';
import type { z } from 'zod';
import type { CwdResolver } from './tool-runner';

/**
 * The working directory for a call: the pinned cwd under isolation `none`/`readonly`; under
 * worktree isolation, the agent's worktree, acquired (idempotently) from the worktree service.
 * Request and reply are the contracts' worktree acquire definitions; the request is signed with the
 * executor's keys for the worktree service, which acquires trees for nobody else.
 *
 * The reply is not signed, and on an open broker anyone may answer first: the directory is never
 * the reply's `path` as such. It is the one the executor derives itself, `<worktreeRoot>/trees/
 * <worktreeId>` with the id of the call's agent (`worktreeIdOf`, as the worktree service names
 * trees), and the reply must name exactly that directory — really, through symlinks, and not a
 * symlink itself. Anything else fails the call closed as `internal` (see {@link verifiedTreeOf}).
 */
export function worktreeCwdResolver(
  nc: NatsConnection,
  subjects: Subjects,
  pinnedCwd: string,
  timeoutMs: number,
  keys: ServiceKeys,
  /** The worktree service's root (`WORKTREE_ROOT`), where every agent's tree lives. */
  worktreeRoot: string,
): CwdResolver {
  // Resolved once, as the executor's other scopes are (the worktree service may make the root
  // after this service starts: until it exists, each call tries again).
  let realRoot: Promise<string> | undefined;
  const rootOf = () =>
    (realRoot ??= realpath(worktreeRoot).catch((err: unknown) => {
      realRoot = undefined;
      throw err;
    }));
  return async (call) => {
    if (typeof call.isolation !== 'object') return pinnedCwd;
    const request = {
      tenant: call.tenant,
      runId: call.runId,
      agentKey: `${call.agent.agentType}:${call.agent.label ?? ''}`,
      ...(call.isolation.ref ? { ref: call.isolation.ref } : {}),
      causationId: call.causationId,
    } satisfies WorktreeAcquireRequest;
    const reply = await requestReply(nc, subjects.worktree('acquire'), request, {
      ok: WorktreeAcquiredReplySchema,
      timeoutMs,
      peer: 'the worktree service',
      sign: { keys, responder: ServiceIdentity.Worktree },
    });
    return verifiedTreeOf(rootOf, request, reply);
  };
}

type AcquiredReply = z.output<typeof WorktreeAcquiredReplySchema>;

/**
 * The real path of the agent's tree, `<real root>/trees/<worktreeId>`, when `reply` names it: a tree
 * of the request's tenant, run and agent (any generation of that spawn: a restarted agent's tree
 * has the next one), at that path once resolved, a directory and not a symlink. Otherwise an
 * `internal` error (not retried: the same answer would come again) that names no host path.
 */
async function verifiedTreeOf(
  realRootOf: () => Promise<string>,
  request: { tenant: string; runId: string; agentKey: string },
  reply: AcquiredReply,
): Promise<string> {
  const { worktree } = reply;
  const worktreeId = worktreeIdOf(
    request.tenant,
    request.runId,
    request.agentKey,
    worktree.generation,
  );
  const refuse = (why: string) =>
    new ToolgateError(
      ErrorCode.Internal,
      `the worktree acquire answer does not name this agent's tree (${why}); the call did not run`,
      { details: { worktreeId } },
    );
  if (
    worktree.worktreeId !== worktreeId ||
    worktree.tenant !== request.tenant ||
    worktree.runId !== request.runId ||
    worktree.agentKey !== request.agentKey
  ) {
    throw refuse('another tree id');
  }
  let expected: string;
  try {
    expected = path.join(await realRootOf(), 'trees', worktreeId);
  } catch {
    throw refuse('the worktree root is not readable here');
  }
  let real: string;
  try {
    const stat = await lstat(reply.path);
    if (!stat.isDirectory()) throw refuse('a symlink, or not a directory');
    real = await realpath(reply.path);
  } catch (err) {
    if (err instanceof ToolgateError) throw err;
    throw refuse('no such directory');
  }
  if (real !== expected) throw refuse('outside the worktree root');
  return expected;
}
