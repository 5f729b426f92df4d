import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError, ErrorCode, ToolgateError, type ToolContext } from '@toolgate/contracts';
import { isInside } from '@toolgate/worktree-guard';
import { parseInternalEntry, SERVICE_PORTS } from './internal-addresses';

/**
 * Environment variables a tool may inherit from the host by default. Only locale, terminal and
 * identity basics: nothing here ever carries a credential, which is the point — tokens,
 * `DATABASE_URL`, NATS credentials and cloud keys must be named explicitly to reach a tool.
 */
export const SAFE_ENV_VARS: readonly string[] = Object.freeze([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'LC_MESSAGES',
  'TERM',
  'TZ',
  'TMPDIR',
]);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const EnvNameSchema = z
  .string()
  .regex(ENV_NAME, { message: 'not a valid environment variable name' });
const PositiveInt = z.number().int().positive();

const EnvSpecSchema = z.strictObject({
  /**
   * `allowlist`: the host variables named in `names` pass through; `inherit-none`: nothing from
   * the host passes. In both modes `set` adds fixed values the operator chose.
   */
  mode: z.enum(['allowlist', 'inherit-none']).default('allowlist'),
  names: z.array(EnvNameSchema).default(() => [...SAFE_ENV_VARS]),
  set: z.record(EnvNameSchema, z.string()).default(() => ({})),
});

/**
 * The execution policy of the in-process builtins: what a running tool may touch. Parse it with
 * {@link parseExecutionPolicy}; defaults live only here.
 *
 * Path scopes bind the file tools (read_file, list_dir, grep, write_file). `shell` runs in the
 * sandbox, which sees the read and write scopes read-only and the pinned directory writable (when
 * it is in a write scope); with the sandbox turned off it gets only the filtered environment and
 * the pinned directory and can touch anything the executor's OS user can. Whether shell runs at
 * all is the permission chain's call.
 */
export const ExecutionPolicySchema = z.strictObject({
  env: EnvSpecSchema.default(() => EnvSpecSchema.parse({})),
  /** The pinned working directory; relative paths in tool arguments resolve against it. */
  cwd: z.string().min(1),
  /** Roots the read tools may see. Default: `[cwd]`. Relative entries resolve against `cwd`. */
  readPaths: z.array(z.string().min(1)).optional(),
  /** Roots write_file may write under. Default: `[cwd]`. An empty list refuses every write. */
  writePaths: z.array(z.string().min(1)).optional(),
  /** Cap on any text a tool returns: file content, each of stdout/stderr, a response body. */
  maxOutputBytes: PositiveInt.max(64 * 1024 * 1024).default(256 * 1024),
  /** Cap on the content write_file accepts. */
  maxWriteBytes: PositiveInt.max(256 * 1024 * 1024).default(8 * 1024 * 1024),
  list: z
    .strictObject({ maxEntries: PositiveInt.max(100_000).default(1000) })
    .default(() => ({ maxEntries: 1000 })),
  grep: z
    .strictObject({
      maxMatches: PositiveInt.max(10_000).default(200),
      maxFiles: PositiveInt.max(1_000_000).default(10_000),
      maxFileBytes: PositiveInt.default(2 * 1024 * 1024),
      /** Wall-clock budget for one grep; the regex runs off the event loop and is killed after it. */
      timeoutMs: PositiveInt.max(600_000).default(15_000),
    })
    .default(() => ({
      maxMatches: 200,
      maxFiles: 10_000,
      maxFileBytes: 2 * 1024 * 1024,
      timeoutMs: 15_000,
    })),
  shell: z
    .strictObject({
      timeoutMs: PositiveInt.max(3_600_000).default(60_000),
      /** The shell that runs `command` as `<shell> -c command`. */
      path: z.string().min(1).default('/bin/sh'),
    })
    .default(() => ({ timeoutMs: 60_000, path: '/bin/sh' })),
  http: z
    .strictObject({
      timeoutMs: PositiveInt.max(600_000).default(30_000),
      maxRedirects: z.number().int().min(0).max(20).default(5),
      /**
       * The internal addresses http_fetch may connect to (`isInternalAddress`: loopback, this
       * host's own, private, shared, link-local, multicast, reserved), as addresses or
       * `<address>/<prefix>` blocks on every port, or on the one a `:<port>` gives
       * (`parseInternalEntry`), checked against every address a name resolves to. None by
       * default: a model steered by an attacker must not reach the services beside the executor
       * (the broker's monitoring, a database, the cloud's metadata service) however the tenant's
       * domain rules read.
       */
      internal: z
        .array(
          z.string().refine((entry) => parseInternalEntry(entry) !== undefined, {
            message: 'not an address or an <address>/<prefix> block, with or without a :<port>',
          }),
        )
        .max(256)
        .default(() => []),
      /**
       * The ports an `internal` entry without a port leaves closed: the broker's and the
       * database's ({@link SERVICE_PORTS}, and what the executor's configuration adds).
       */
      servicePorts: z
        .array(z.number().int().min(1).max(65_535))
        .max(64)
        .default(() => [...SERVICE_PORTS]),
    })
    .default(() => ({
      timeoutMs: 30_000,
      maxRedirects: 5,
      internal: [],
      servicePorts: [...SERVICE_PORTS],
    })),
});

/** The input form of an execution policy (what configuration provides). */
export type ExecutionPolicyInput = z.input<typeof ExecutionPolicySchema>;

/** A parsed execution policy: absolute `cwd`, absolute scope roots, every default filled in. */
export type ExecutionPolicy = Readonly<
  Omit<z.output<typeof ExecutionPolicySchema>, 'readPaths' | 'writePaths'> & {
    readPaths: readonly string[];
    writePaths: readonly string[];
  }
>;

/**
 * Parses and freezes an execution policy. `cwd` and relative scope roots are made absolute
 * (relative `cwd` against the process cwd, scope roots against `cwd`); a missing scope defaults
 * to `[cwd]`. Idempotent: a parsed policy parses to an equal one. Throws {@link ConfigError}
 * naming every problem.
 */
export function parseExecutionPolicy(
  input: ExecutionPolicyInput | ExecutionPolicy,
): ExecutionPolicy {
  const parsed = ExecutionPolicySchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String),
      message: i.message,
    }));
    throw new ConfigError(
      `execution policy: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      { details: { issues } },
    );
  }
  const p = parsed.data;
  const cwd = path.resolve(p.cwd);
  const roots = (list: string[] | undefined) =>
    Object.freeze((list ?? [cwd]).map((r) => path.resolve(cwd, r)));
  return Object.freeze({
    ...p,
    env: Object.freeze({
      ...p.env,
      names: Object.freeze([...p.env.names]),
      set: Object.freeze({ ...p.env.set }),
    }),
    cwd,
    readPaths: roots(p.readPaths),
    writePaths: roots(p.writePaths),
  }) as ExecutionPolicy;
}

/**
 * The policy with its directory and scope roots as real paths (through symlinks as far as they
 * exist), resolved once, when the service starts: the sandbox binds only real paths and refuses a
 * scope that is a symlink at run time, so a root another call swapped for a link to the host's
 * keys is never followed.
 */
export function withRealPaths(
  policy: ExecutionPolicy,
  real: (abs: string) => string,
): ExecutionPolicy {
  return Object.freeze({
    ...policy,
    cwd: real(policy.cwd),
    readPaths: Object.freeze(policy.readPaths.map(real)),
    writePaths: Object.freeze(policy.writePaths.map(real)),
  });
}

/**
 * The policy one dispatch runs under, derived cheaply (no I/O) from the service's base policy and
 * the dispatch's {@link ToolContext}:
 * - worktree isolation: `ctx.cwd` is the worktree; it becomes the cwd and the only read and
 *   write scope, so a tool in a worktree never reads or writes the host tree through the builtins;
 * - `readonly` isolation: no write scope at all (the chain also denies write tools; this is the
 *   second line, for tools without risk metadata);
 * - `none`: the base scopes, with `ctx.cwd` as the working directory.
 */
export function policyForContext(
  base: ExecutionPolicy,
  ctx: Pick<ToolContext, 'cwd' | 'isolation'>,
): ExecutionPolicy {
  const cwd = path.resolve(base.cwd, ctx.cwd);
  if (typeof ctx.isolation === 'object' && ctx.isolation.kind === 'worktree') {
    const only = Object.freeze([cwd]);
    return Object.freeze({ ...base, cwd, readPaths: only, writePaths: only });
  }
  if (ctx.isolation === 'readonly') {
    return Object.freeze({ ...base, cwd, writePaths: Object.freeze([]) });
  }
  return cwd === base.cwd ? base : Object.freeze({ ...base, cwd });
}

/**
 * The environment a tool process receives. In `allowlist` mode only the named host variables pass
 * (absent ones stay absent, never empty); in `inherit-none` mode none do. `set` is applied last.
 * Nothing else from `hostEnv` can reach the result.
 */
export function buildEnv(
  policy: Pick<ExecutionPolicy, 'env'>,
  hostEnv: NodeJS.ProcessEnv,
): Record<string, string> {
  const env: Record<string, string> = {};
  if (policy.env.mode === 'allowlist') {
    for (const name of policy.env.names) {
      // Own properties only: an inherited `toString` is not a variable.
      if (!Object.prototype.hasOwnProperty.call(hostEnv, name)) continue;
      const value = hostEnv[name];
      if (typeof value === 'string') env[name] = value;
    }
  }
  for (const [name, value] of Object.entries(policy.env.set)) env[name] = value;
  return env;
}

/** Which scope a path is checked against. */
export type PathAccess = 'read' | 'write';

const MAX_SYMLINK_HOPS = 40;

/**
 * Resolves `requested` for reading: relative to `cwd`, through every symlink, and refused with
 * `path-outside-scope` unless the real path lies under one of the policy's read roots. A path that
 * does not exist is resolved as far as it exists, so the answer (outside scope, or not found) never
 * reveals whether something exists outside the scopes.
 */
export async function resolveForRead(
  policy: ExecutionPolicy,
  cwd: string,
  requested: string,
): Promise<string> {
  return resolveInScope(policy.readPaths, cwd, requested, 'read');
}

/**
 * Resolves `requested` for writing, like {@link resolveForRead} but against the write roots. A
 * target that does not exist yet resolves through its nearest existing ancestor (and through a
 * dangling symlink's target), so creating `link/new-dir/file` where `link` points outside is
 * refused before any directory is created.
 */
export async function resolveForWrite(
  policy: ExecutionPolicy,
  cwd: string,
  requested: string,
): Promise<string> {
  return resolveInScope(policy.writePaths, cwd, requested, 'write');
}

async function resolveInScope(
  roots: readonly string[],
  cwd: string,
  requested: string,
  access: PathAccess,
): Promise<string> {
  if (requested.includes('\0')) throw outsideScope(requested, access);
  const real = await realpathLenient(path.resolve(cwd, requested), requested, access);
  for (const root of roots) {
    // Roots are resolved per call: a root may itself be (or sit under) a symlink, and comparing a
    // real path with a symlinked root would refuse legitimate paths.
    const realRoot = await realpathLenient(root, requested, access);
    if (isInside(realRoot, real)) return real;
  }
  throw outsideScope(requested, access);
}

/**
 * `realpath` that tolerates a missing tail: the existing prefix is resolved by the OS, a dangling
 * symlink in the tail is followed by hand, and the remaining components are appended.
 */
async function realpathLenient(
  abs: string,
  requested: string,
  access: PathAccess,
  hops = 0,
): Promise<string> {
  try {
    return await fs.realpath(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw outsideScope(requested, access);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw pathError(requested, err);
  }
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  const realParent = await realpathLenient(parent, requested, access, hops);
  const candidate = path.join(realParent, path.basename(abs));
  let isLink = false;
  try {
    isLink = (await fs.lstat(candidate)).isSymbolicLink();
  } catch {
    return candidate;
  }
  if (!isLink) return candidate;
  if (hops >= MAX_SYMLINK_HOPS) throw outsideScope(requested, access);
  const target = await fs.readlink(candidate);
  return realpathLenient(path.resolve(realParent, target), requested, access, hops + 1);
}

/** The `path-outside-scope` error of `requested`: it names only the path the model asked for. */
export function outsideScope(requested: string, access: PathAccess): ToolgateError {
  // Only the path the model asked for: never the resolved target, a scope root or a host path.
  return new ToolgateError(
    ErrorCode.PathOutsideScope,
    `${requested}: outside the ${access} scope`,
    {
      details: { path: requested, access },
    },
  );
}

/**
 * A file-system failure as the model should see it: the errno code and the requested path, never
 * the resolved path Node puts into its messages.
 */
export function pathError(requested: string, err: unknown): ToolgateError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = code ? (ERRNO_TEXT[code] ?? code) : 'cannot be accessed';
  return new ToolgateError(ErrorCode.ToolFailed, `${requested}: ${reason}`, {
    details: { path: requested, ...(code ? { errno: code } : {}) },
  });
}

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EEXIST: 'already exists',
  ELOOP: 'too many levels of symbolic links',
  ENOSPC: 'no space left on device',
  EROFS: 'read-only file system',
  ENAMETOOLONG: 'name too long',
};

/** Open flags that refuse a symlink swapped in after resolution (a narrow race, closed cheaply). */
export const NOFOLLOW = fsConstants.O_NOFOLLOW;
