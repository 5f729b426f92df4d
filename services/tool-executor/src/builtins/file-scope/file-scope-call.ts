import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { isInside } from '@toolgate/worktree-guard';
import {
  outsideScope,
  pathError,
  type ExecutionPolicy,
  type PathAccess,
} from '../execution-policy';
import { runFileOpInProcess } from './file-ops-in-process';
import type { CallBounds, FileScope, FileScopePool, HelperRefusal } from './file-scope-pool';

/**
 * The mounts a file builtin's helper gets for `policy`: the call's directory, writable when a
 * write scope covers it (never under read-only isolation, which has none); the write scopes
 * writable; the read scopes read-only (those a write scope already holds are left to it).
 */
export function fileScopeOf(policy: ExecutionPolicy): FileScope {
  const writable = policy.writePaths.some((root) => isInside(root, policy.cwd));
  return {
    cwd: policy.cwd,
    writable,
    readOnlyPaths: policy.readPaths.filter((p) => !policy.writePaths.some((w) => isInside(w, p))),
    writablePaths: writable
      ? policy.writePaths.filter((w) => !isInside(policy.cwd, w))
      : [...policy.writePaths],
  };
}

/**
 * Runs one file operation of the helper program (`file-helper-program.ts`) and returns its result,
 * or throws the builtin's own error for a refusal: in a sandboxed helper of the call's scope, or in
 * the executor's process when `pool` is null (EXECUTOR_SANDBOX=off) — the same code either way.
 */
export async function inFileScope<T>(
  pool: FileScopePool | null,
  policy: ExecutionPolicy,
  op: 'read' | 'list' | 'grep' | 'write',
  args: { path: string } & Record<string, unknown>,
  access: PathAccess,
  bounds: CallBounds,
): Promise<T> {
  const roots = access === 'read' ? policy.readPaths : policy.writePaths;
  const request = { ...args, cwd: policy.cwd, roots };
  const reply = pool
    ? await pool.call(fileScopeOf(policy), op, request, bounds)
    : await runFileOpInProcess(op, request, bounds);
  if (reply.ok) return reply.result as T;
  throw refusalError(args.path, access, reply.error);
}

function refusalError(
  requested: string,
  access: PathAccess,
  refusal: HelperRefusal,
): ToolgateError {
  switch (refusal.kind) {
    case 'outside':
      return outsideScope(requested, access);
    case 'binary':
      return new ToolgateError(ErrorCode.ToolFailed, `${requested}: binary file, not read`, {
        details: { path: requested },
      });
    default:
      return pathError(requested, refusal.errno ? { code: refusal.errno } : undefined);
  }
}
