import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { findProtectedPaths, type ProtectedPathMatcher } from '@toolgate/worktree-guard';

/**
 * The existing protected paths (the call's policy: `.git`, `.toolgate`, `.env*`, … and git
 * directories under any name) in a sandboxed call's directory, for the sandbox to bind read-only.
 * A directory too large to search completely refuses the call: a protected path the walk did not
 * reach would be writable.
 */
export async function protectedBinds(
  matcher: ProtectedPathMatcher,
  cwd: string,
): Promise<string[]> {
  const found = await findProtectedPaths(matcher, [cwd]);
  if (found.truncated) {
    throw new ToolgateError(
      ErrorCode.Config,
      'the working directory is too large to find every protected path in it; the sandbox will not run there',
    );
  }
  return found.paths;
}
