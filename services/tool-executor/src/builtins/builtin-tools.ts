import type { ToolContext } from '@toolgate/contracts';
import { DEFAULT_PROTECTION } from '@toolgate/permissions';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import type { Sandbox } from '@toolgate/sandbox';
import type { ToolDef } from '@toolgate/tools';
import type { BuiltinDeps, CheckDomain } from './builtin-deps';
import {
  parseExecutionPolicy,
  policyForContext,
  type ExecutionPolicy,
  type ExecutionPolicyInput,
} from './execution-policy';
import type { FileScopePool } from './file-scope/file-scope-pool';
import { createGrepTool } from './grep-tool';
import { createHttpFetchTool } from './http-fetch-tool';
import { createListDirTool } from './list-dir-tool';
import { createReadFileTool } from './read-file-tool';
import { createShellTool } from './shell-tool';
import { createWriteFileTool } from './write-file-tool';

/** What {@link createBuiltinTools} needs. */
export interface BuiltinToolsOptions {
  /** The service's base execution policy, parsed or in its input form. */
  policy: ExecutionPolicy | ExecutionPolicyInput;
  /** The domain-rule check http_fetch runs before every connection. Fails closed. */
  checkDomain: CheckDomain;
  /**
   * The policy one dispatch runs under. Default {@link policyForContext}: `ctx.cwd` is the working
   * directory, and under worktree isolation the worktree is the only read and write scope. Runs on
   * every call; keep it free of I/O.
   */
  policyFor?: (base: ExecutionPolicy, ctx: ToolContext) => ExecutionPolicy;
  /**
   * The protected paths of a call's policy. Default: the built-in and default ones
   * (`DEFAULT_PROTECTION`). Runs on every write; keep it free of I/O.
   */
  protectedPaths?: (ctx: ToolContext) => ProtectedPathMatcher;
  /** The environment the allowlist filters. Default `process.env`. */
  hostEnv?: NodeJS.ProcessEnv;
  /**
   * The sandbox `shell` runs in. Required, so no caller runs shell on the host by forgetting it:
   * `null` is the explicit opt-out (EXECUTOR_SANDBOX=off).
   */
  sandbox: Sandbox | null;
  /**
   * The sandboxed helpers the file builtins run in (see `FileScopePool`). Required for the same
   * reason as `sandbox`: `null` (in-process, path checks only) goes with EXECUTOR_SANDBOX=off.
   */
  files: FileScopePool | null;
}

/**
 * Builds the in-process builtins — read_file, list_dir, grep, write_file, shell, http_fetch — each
 * with its declared risk, bound to one execution policy. Built once per service; the per-dispatch
 * part (cwd, isolation) comes from each call's ToolContext, so nothing is rebuilt per dispatch.
 */
export function createBuiltinTools(options: BuiltinToolsOptions): ToolDef[] {
  const base = parseExecutionPolicy(options.policy);
  const derive = options.policyFor ?? policyForContext;
  const deps: BuiltinDeps = {
    policyFor: (ctx) => derive(base, ctx),
    checkDomain: options.checkDomain,
    protectedPaths: options.protectedPaths ?? (() => DEFAULT_PROTECTION),
    hostEnv: options.hostEnv ?? process.env,
    sandbox: options.sandbox,
    files: options.files,
  };
  return [
    createReadFileTool(deps),
    createListDirTool(deps),
    createGrepTool(deps),
    createWriteFileTool(deps),
    createShellTool(deps),
    createHttpFetchTool(deps),
  ];
}
