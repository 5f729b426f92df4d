import { realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ConfigError,
  devKeyringPath,
  isStdioUpstream,
  McpUpstreamsSchema,
} from '@toolgate/contracts';

/** A path a service keeps state in (a database, a key or token file, worktrees) and its setting. */
export interface StatePath {
  /** The environment variable that sets it (or whose default it is). */
  readonly setting: string;
  readonly path: string;
}

/**
 * Where a service keeps its state by default: `$XDG_STATE_HOME/toolgate`, or
 * `~/.local/state/toolgate` — outside any repository and any tool's working directory.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv): string {
  const state = env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  return path.join(state, 'toolgate');
}

/**
 * The key files a service reads from its environment: `TOOLGATE_SIGNING_KEYS_FILE`, or — when no
 * key is configured at all — the development keyring.
 */
export function signingStatePaths(env: NodeJS.ProcessEnv): StatePath[] {
  if (env.TOOLGATE_SIGNING_KEYS_FILE) {
    return [{ setting: 'TOOLGATE_SIGNING_KEYS_FILE', path: env.TOOLGATE_SIGNING_KEYS_FILE }];
  }
  if (env.TOOLGATE_SIGNING_KEY) return [];
  return [{ setting: 'XDG_STATE_HOME (the development keyring)', path: devKeyringPath(env) }];
}

/**
 * Refuses, with a ConfigError naming the settings (never a path or a secret), any state path that
 * lies inside a tool's scope: the executor's working directory (`EXECUTOR_CWD`, default the
 * process's), its read paths, its write paths or the paths every sandbox sees
 * (`EXECUTOR_SANDBOX_READ_PATHS`) and the scope of every stdio MCP server
 * (`TOOLGATE_MCP_UPSTREAMS`' `command.cwd`), read from the same environment. What lies there
 * a tool can read — a key, a token, another tenant's calls in the database — whatever the path
 * checks say. Paths are compared real (through symlinks, as far as they exist).
 */
export function assertStateOutsideToolScope(
  env: NodeJS.ProcessEnv,
  state: readonly StatePath[],
): void {
  const scopes = toolScopes(env);
  for (const s of state) {
    const real = realLenient(path.resolve(s.path));
    const scope = scopes.find((sc) => isInside(sc.path, real));
    if (scope) {
      throw new ConfigError(
        `${s.setting} is inside ${scope.setting}: the tools could read it. Keep service state outside every tool's scope (the default is under XDG_STATE_HOME, or ~/.local/state)`,
        { details: { field: s.setting, scope: scope.setting } },
      );
    }
  }
}

/**
 * Refuses, with a ConfigError naming the setting, a scope a tool may write that holds Toolgate's own
 * installation ({@link installationRoot}: the checkout `npm start` runs from, the image's `/app`):
 * a tool that writes there rewrites code the services load later — a script worker reloads its
 * engine from `node_modules` after a kill, every service its sources at a restart — outside every
 * sandbox, where the keys are. A scope inside the installation (a folder of the checkout that holds
 * none of it) is left alone.
 */
export function assertInstallationOutsideToolScope(
  env: NodeJS.ProcessEnv,
  root: string | undefined = installationRoot(),
): void {
  if (!root) return;
  // Read scopes may hold it: what a tool reads there is the code anyone can read.
  const writable = new Set(['EXECUTOR_CWD', 'EXECUTOR_WRITE_PATHS', 'TOOLGATE_MCP_UPSTREAMS']);
  const scope = toolScopes(env).find((sc) => writable.has(sc.setting) && isInside(sc.path, root));
  if (scope) {
    throw new ConfigError(
      `${scope.setting} holds Toolgate's own installation: a tool could rewrite the code the services run. Point it at a project of yours (npm start's default is a workspace under XDG_STATE_HOME)`,
      { details: { field: scope.setting } },
    );
  }
}

/**
 * Where this process's code is installed, real: the directory whose `node_modules` its
 * dependencies load from. Undefined when that cannot be told (a bundle with no `node_modules`).
 */
export function installationRoot(): string | undefined {
  const dependency = realLenient(require.resolve('zod'));
  const parts = dependency.split(path.sep);
  const at = parts.lastIndexOf('node_modules');
  return at > 0 ? parts.slice(0, at).join(path.sep) || path.sep : undefined;
}

/**
 * Every scope a tool reaches: the executor's working directory (`EXECUTOR_CWD`, default the
 * process's), its read and write paths, the paths every sandbox sees and the directory of every
 * stdio MCP server, real.
 */
function toolScopes(env: NodeJS.ProcessEnv): StatePath[] {
  const cwd = path.resolve(env.EXECUTOR_CWD || process.cwd());
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((p) => path.resolve(cwd, p));
  return [
    { setting: 'EXECUTOR_CWD', path: cwd },
    ...list(env.EXECUTOR_READ_PATHS).map((p) => ({ setting: 'EXECUTOR_READ_PATHS', path: p })),
    ...list(env.EXECUTOR_WRITE_PATHS).map((p) => ({ setting: 'EXECUTOR_WRITE_PATHS', path: p })),
    ...list(env.EXECUTOR_SANDBOX_READ_PATHS).map((p) => ({
      setting: 'EXECUTOR_SANDBOX_READ_PATHS',
      path: p,
    })),
    ...stdioScopes(env.TOOLGATE_MCP_UPSTREAMS).map((p) => ({
      setting: 'TOOLGATE_MCP_UPSTREAMS',
      path: p,
    })),
  ].map((s) => ({ ...s, path: realLenient(s.path) }));
}

/**
 * The directories stdio MCP servers run in. A value that does not parse names none here: the
 * services that use it refuse it themselves, with the parser's own error.
 */
function stdioScopes(json: string | undefined): string[] {
  if (!json) return [];
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return [];
  }
  const parsed = McpUpstreamsSchema.safeParse(raw);
  if (!parsed.success) return [];
  return parsed.data.flatMap((u) => (isStdioUpstream(u) && u.command.cwd ? [u.command.cwd] : []));
}

function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * `abs` through its symlinks as far as it exists (the missing tail appended as is): what the OS
 * opens for it now. For configured paths resolved once, at start-up.
 */
export function realLenient(abs: string): string {
  const missing: string[] = [];
  for (let p = abs; ;) {
    try {
      return path.join(realpathSync.native(p), ...missing.reverse());
    } catch {
      const parent = path.dirname(p);
      if (parent === p) return abs;
      missing.push(path.basename(p));
      p = parent;
    }
  }
}
