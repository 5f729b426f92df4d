import { z } from 'zod';
import type { ToolContext } from '@toolgate/contracts';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import type { Sandbox } from '@toolgate/sandbox';
import type { ExecutionPolicy } from './execution-policy';
import type { FileScopePool } from './file-scope/file-scope-pool';

/** A domain rule callback's answer for one host. Anything but `'allow'` refuses the connection. */
export type DomainVerdict = 'allow' | 'deny';

/**
 * Decides whether http_fetch may connect to `host` (lower-case, no port, IPv6 without brackets,
 * no trailing dot). Called before every connection, redirects included. A throw or rejection is a
 * deny: the check fails closed.
 */
export type CheckDomain = (host: string) => DomainVerdict | Promise<DomainVerdict>;

/** What every builtin needs at run time; built once by `createBuiltinTools`. */
export interface BuiltinDeps {
  /** The policy one dispatch runs under. Called on every call, so it must be cheap (no I/O). */
  policyFor(ctx: ToolContext): ExecutionPolicy;
  checkDomain: CheckDomain;
  /**
   * The protected paths of the call's policy (`chain.protectedPaths`), for what the chain could not
   * see: a write that reaches one through a symlink or under another name is refused.
   */
  protectedPaths(ctx: ToolContext): ProtectedPathMatcher;
  /** The environment `buildEnv` filters; the executor's `process.env` unless a test injects one. */
  hostEnv: NodeJS.ProcessEnv;
  /** The sandbox `shell` runs in; null only when the operator turned the sandbox off. */
  sandbox: Sandbox | null;
  /**
   * The sandboxed helpers the file builtins (read_file, list_dir, grep, write_file) run in, so that
   * their mount namespace holds only the call's scope; null only when the sandbox is off, and
   * then they run in the executor's process with their path checks alone.
   */
  files: FileScopePool | null;
}

/** A path argument: bounded, and without a NUL byte (the OS would refuse it anyway). */
export const PathArg = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), { message: 'must not contain a NUL byte' });
