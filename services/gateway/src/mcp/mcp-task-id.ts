import { createHmac, timingSafeEqual } from 'node:crypto';
import { isSubjectToken } from '@toolgate/contracts';

/** The dispatch an MCP task is: where its journal lives. */
export interface TaskRef {
  runId: string;
  dispatchId: string;
}

/** Whom a task id was minted for: only that principal may read, collect or cancel it. */
export interface TaskOwner {
  tenant: string;
  identity: string;
}

const VERSION = 'tgt1';
/** Longer than any id {@link mintTaskId} makes (two subject tokens and a MAC); refused unread. */
const MAX_TASK_ID_CHARS = 600;

/**
 * An MCP task id: the dispatch it names and an HMAC-SHA256 (under the gateway's MCP state key,
 * shared by every replica) over that dispatch and its owner. It carries no state of its own — the
 * task's state is the journal's — so it outlives a restart and is honoured by any replica; it is
 * unguessable, and bound to the tenant and identity it was minted for.
 */
export function mintTaskId(key: Uint8Array, owner: TaskOwner, ref: TaskRef): string {
  return `${VERSION}.${ref.runId}.${ref.dispatchId}.${mac(key, owner, ref)}`;
}

/**
 * The dispatch a task id names, when it was minted by this gateway for this owner; null for
 * anything else (malformed, forged, another tenant's or identity's) — the caller cannot tell
 * which, so a refusal says nothing about whether someone else's task exists.
 */
export function verifyTaskId(key: Uint8Array, owner: TaskOwner, taskId: unknown): TaskRef | null {
  if (typeof taskId !== 'string' || taskId.length > MAX_TASK_ID_CHARS) return null;
  const parts = taskId.split('.');
  if (parts.length !== 4 || parts[0] !== VERSION) return null;
  const [, runId, dispatchId, given] = parts as [string, string, string, string];
  if (!isSubjectToken(runId) || !isSubjectToken(dispatchId)) return null;
  const expected = Buffer.from(mac(key, owner, { runId, dispatchId }), 'utf8');
  const actual = Buffer.from(given, 'utf8');
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return null;
  return { runId, dispatchId };
}

function mac(key: Uint8Array, owner: TaskOwner, ref: TaskRef): string {
  return createHmac('sha256', key)
    .update(['mcp-task', owner.tenant, owner.identity, ref.runId, ref.dispatchId].join('\0'))
    .digest('base64url');
}
