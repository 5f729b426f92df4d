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
 * Refuses, with a ConfigError naming the setting, a scope a tool may write that overlaps Toolgate's
 * own installation ({@link installationPaths}: the checkout `npm start` runs from, or the image's
 * `/app`, and the compiled modules `npm start` caches): holding it, or inside it (a package's
 * sources, `node_modules`, `scripts`). A tool that writes there rewrites code the services load
 * later — a script worker reloads its engine from `node_modules` after a kill, every service its
 * sources at a restart — outside every sandbox, where the keys are.
 */
export function assertInstallationOutsideToolScope(
  env: NodeJS.ProcessEnv,
  installation: readonly string[] = installationPaths(),
): void {
  // Read scopes may hold it: what a tool reads there is the code anyone can read.
  const writable = new Set(['EXECUTOR_CWD', 'EXECUTOR_WRITE_PATHS', 'TOOLGATE_MCP_UPSTREAMS']);
  for (const sc of toolScopes(env)) {
    if (!writable.has(sc.setting)) continue;
    if (installation.some((p) => isInside(sc.path, p) || isInside(p, sc.path))) {
      throw new ConfigError(
        `${sc.setting} overlaps Toolgate's own installation: a tool could rewrite the code the services run. Point it at a project of yours, outside it (npm start's default is a workspace under XDG_STATE_HOME)`,
        { details: { field: sc.setting } },
      );
    }
  }
}

/**
 * Refuses a stdio MCP server's directory (`TOOLGATE_MCP_UPSTREAMS`' `command.cwd`) that overlaps
 * the builtins' directory or a write scope: such a server runs in a sandbox of its own directory,
 * without the call's protected paths and with nothing put back after its calls, so in the tools'
 * project it could write `.github/workflows`, `.env` or a nested repository's config — and rename a
 * folder under a racing `write_file`. Its directory is its own.
 */
export function assertStdioScopesApart(env: NodeJS.ProcessEnv): void {
  const scopes = toolScopes(env);
  const project = scopes.filter(
    (sc) => sc.setting === 'EXECUTOR_CWD' || sc.setting === 'EXECUTOR_WRITE_PATHS',
  );
  for (const server of scopes.filter((sc) => sc.setting === 'TOOLGATE_MCP_UPSTREAMS')) {
    const shared = project.find(
      (sc) => isInside(sc.path, server.path) || isInside(server.path, sc.path),
    );
    if (shared) {
      throw new ConfigError(
        `a stdio MCP server's directory (TOOLGATE_MCP_UPSTREAMS) overlaps ${shared.setting}: give each server a directory of its own, outside the tools' project`,
        { details: { field: 'TOOLGATE_MCP_UPSTREAMS', scope: shared.setting } },
      );
    }
  }
}

/**
 * Where this process's code is loaded from, real: the directory whose `node_modules` its
 * dependencies load from (none when that cannot be told: a bundle), and the cache of modules
 * compiled from source when it runs from the sources (`scripts/from-source.cjs`).
 */
export function installationPaths(): string[] {
  const paths: string[] = [];
  const dependency = realLenient(require.resolve('zod'));
  const parts = dependency.split(path.sep);
  const at = parts.lastIndexOf('node_modules');
  if (at > 0) paths.push(parts.slice(0, at).join(path.sep) || path.sep);
  const cache = (globalThis as Record<symbol, unknown>)[Symbol.for('toolgate.from-source-cache')];
  if (typeof cache === 'string') paths.push(realLenient(path.resolve(cache)));
  return paths;
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
