import { ConfigError } from '@toolgate/contracts';

/**
 * Protected paths: files and directories whose contents make something else run code or hand out
 * credentials (git's config and hooks, the service's own state, shell start-up files, secrets).
 * A write to one asks (deny under `strict`) whatever else the chain says; see
 * {@link compileProtectedPaths}. This file is the pure, lexical half: it knows names, not the file
 * system. The executor and the sandbox resolve symlinks and git directories on disk with the same
 * matcher (`@toolgate/worktree-guard`).
 */

/** Always protected, in every policy: git metadata and the service's own state. */
const BUILTIN_PROTECTED_PATHS: readonly string[] = Object.freeze(['.git', '.toolgate']);

/**
 * Protected by default besides {@link BUILTIN_PROTECTED_PATHS}; a policy adds its own with
 * `protectedPaths.paths` and waives one by naming it in `protectedPaths.except`.
 */
export const DEFAULT_PROTECTED_PATHS: readonly string[] = Object.freeze([
  // Secrets and credentials.
  '.env*',
  '.ssh',
  '.gnupg',
  '.aws',
  '.kube',
  '.docker/config.json',
  '.netrc',
  '.npmrc',
  '.yarnrc',
  '.yarnrc.yml',
  '.pypirc',
  '.pgpass',
  '.git-credentials',
  // Git configuration outside .git: a global config can set core.fsmonitor or core.hooksPath.
  '.gitconfig',
  '.config/git',
  // Shell start-up files: run by the next shell that starts.
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.profile',
  '.zshrc',
  '.zshenv',
  '.zprofile',
  '.zlogin',
  '.zlogout',
  '.config/fish',
  // Code that CI or an editor runs on its own.
  '.github/workflows',
  '.gitlab-ci.yml',
  '.vscode/settings.json',
  '.vscode/tasks.json',
  '.vscode/launch.json',
  '.idea',
  '.devcontainer',
  // Hook managers: their files run on the next commit or push.
  '.husky',
  '.pre-commit-config.yaml',
  'lefthook.yml',
  '.lefthook.yml',
  // Cargo's configuration: `[target.*] runner`, `rustc-wrapper` and aliases run on the next build.
  '.cargo/config.toml',
  '.cargo/config',
  // Other agents' permission settings, tool servers and standing instructions.
  '.claude',
  '.cursor',
  '.mcp.json',
  'CLAUDE.md',
  'AGENTS.md',
  'GEMINI.md',
  '.cursorrules',
  '.windsurfrules',
  '.clinerules',
  '.github/copilot-instructions.md',
]);

/** Which verdict a write to a protected path gets. */
export type ProtectedPathEffect = 'ask' | 'deny';

/** The input fields through which a tool writes files (`{ write_file: ['path'] }`). */
const DEFAULT_WRITE_FIELDS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  write_file: Object.freeze(['path']),
});

/** What a policy layer says about protected paths (the `protectedPaths` key of a layer). */
export interface ProtectedPathsConfig {
  readonly effect?: ProtectedPathEffect | undefined;
  readonly paths?: readonly string[] | undefined;
  readonly except?: readonly string[] | undefined;
  readonly writeFields?: Readonly<Record<string, readonly string[]>> | undefined;
}

/** Which protected pattern a path falls under. */
export interface ProtectedPathMatch {
  /** The path as it was given. */
  readonly path: string;
  /** The protected pattern it matched (`.git`, `.env*`, ...). */
  readonly pattern: string;
}

/** A compiled set of protected paths. Build it with {@link compileProtectedPaths}. */
export interface ProtectedPaths {
  /** `ask` unless some layer (or the `strict` preset) made it `deny`. */
  readonly effect: ProtectedPathEffect;
  /** Every protected pattern, built-in ones first. */
  readonly patterns: readonly string[];
  /** Patterns waived by the policy (each names what it waives). */
  readonly except: readonly string[];
  /** Tool name → input fields that name a file the tool writes (dotted paths). */
  readonly writeFields: ReadonlyMap<string, readonly string[]>;
  /** The pattern `path` falls under (the path itself or any directory above it), if any. */
  match(path: string): ProtectedPathMatch | undefined;
  /**
   * A pattern of more than one component that `path` ends inside of (`.vscode` for
   * `.vscode/settings.json`, `.github` for `.github/workflows`), or one `path` falls under: a
   * symlink there makes a protected path of whatever the folder it points to holds, so it is
   * protected as a link (`ln -s folder-the-call-wrote .vscode` creates `.vscode/settings.json`).
   */
  matchBelow(path: string): ProtectedPathMatch | undefined;
  /** The configuration this was compiled from, merged (for describing the chain). */
  readonly config: Required<Omit<ProtectedPathsConfig, 'writeFields'>> & {
    writeFields: Record<string, string[]>;
  };
}

type Component = string | Glob | typeof ANY_DEPTH;
const ANY_DEPTH: unique symbol = Symbol('**');

interface CompiledPattern {
  readonly source: string;
  readonly parts: readonly Component[];
}

const MAX_PATTERN_LENGTH = 1_024;
const NONE: CompiledPattern[] = [];
const EFFECT_RANK: Readonly<Record<ProtectedPathEffect, number>> = { ask: 1, deny: 2 };

/**
 * Compiles protected paths from the layers that configure them (engine first, then the profile),
 * on top of the built-in and default patterns. Patterns and exceptions add up across layers; the
 * effect is the strictest any layer (or `minimumEffect`, `deny` for the `strict` preset) sets.
 *
 * Pattern syntax (case-insensitive, like the file systems git has to protect itself on): `/`
 * separates components, `*` and `?` match within one component, `**` any number of them. A
 * pattern is matched at every depth and covers everything below what it names: `.ssh` protects
 * `.ssh/config`, `home/u/.ssh/id_rsa` and `/root/.ssh`. An exception must name what it waives:
 * its first component has no wildcard (`.github/workflows/docs.yml`, not `**`).
 * @throws ConfigError for an invalid pattern or exception
 */
export function compileProtectedPaths(
  layers: readonly (ProtectedPathsConfig | undefined)[] = [],
  minimumEffect: ProtectedPathEffect = 'ask',
): ProtectedPaths {
  let effect = minimumEffect;
  const sources = [...BUILTIN_PROTECTED_PATHS, ...DEFAULT_PROTECTED_PATHS];
  const except: string[] = [];
  const writeFields = new Map<string, string[]>(
    Object.entries(DEFAULT_WRITE_FIELDS).map(([t, f]) => [t, [...f]]),
  );
  for (const layer of layers) {
    if (layer === undefined) continue;
    if (layer.effect !== undefined && EFFECT_RANK[layer.effect] > EFFECT_RANK[effect])
      effect = layer.effect;
    for (const p of layer.paths ?? []) if (!sources.includes(p)) sources.push(p);
    for (const p of layer.except ?? []) if (!except.includes(p)) except.push(p);
    for (const [tool, fields] of Object.entries(layer.writeFields ?? {})) {
      const known = writeFields.get(tool) ?? [];
      for (const f of fields) if (!known.includes(f)) known.push(f);
      writeFields.set(tool, known);
    }
  }
  const patterns = sources.map((s) => basePattern(s) ?? compilePattern(s, 'protected path'));
  const exceptions = except.map((s) => {
    const compiled = compilePattern(s, 'protected-path exception');
    const first = compiled.parts[0];
    if (typeof first !== 'string') {
      throw new ConfigError(
        `protected-path exception ${JSON.stringify(s)} must name what it waives: its first component cannot be a wildcard`,
        { details: { except: s } },
      );
    }
    return { ...compiled, asPath: pathComponents(s) };
  });
  // Most patterns are one literal name (`.git`, `.npmrc`): a set lookup per component finds them;
  // only the rest are matched one by one.
  // Patterns that start with a literal name are looked up by it at each depth; only those that
  // start with a wildcard are tried everywhere.
  const byFirst = new Map<string, CompiledPattern[]>();
  const others: CompiledPattern[] = [];
  for (const p of patterns) {
    const first = p.parts[0];
    if (typeof first === 'string') {
      const list = byFirst.get(first);
      if (list === undefined) byFirst.set(first, [p]);
      else list.push(p);
    } else others.push(p);
  }
  const candidates = (components: readonly string[]): CompiledPattern[] => {
    let out: CompiledPattern[] | undefined;
    const matchers = new Map<CompiledPattern, (pi: number, ci: number) => boolean>();
    for (let i = 0; i < components.length; i++) {
      const list = byFirst.get(components[i]!);
      if (list === undefined) continue;
      for (const p of list) {
        let from = matchers.get(p);
        if (!from) matchers.set(p, (from = matcher(p.parts, components)));
        if (from(1, i + 1) && !out?.includes(p)) (out ??= []).push(p);
      }
    }
    for (const p of others) if (matchesAnywhere(p.parts, components)) (out ??= []).push(p);
    return out ?? NONE;
  };
  const match = (path: string): ProtectedPathMatch | undefined => {
    const components = pathComponents(path);
    if (components.length === 0) return undefined;
    for (const p of candidates(components)) {
      // An exception waives a pattern's match when it covers this path and lies inside what the
      // pattern protects: `.github/workflows/docs.yml` waives that file only, and `.claude` does
      // not waive `.claude/.git/config` (`.git` does not cover `.claude`).
      const waived = exceptions.some(
        (e) => matchesAnywhere(e.parts, components) && matchesAnywhere(p.parts, e.asPath),
      );
      if (!waived) return { path, pattern: p.source };
    }
    return undefined;
  };
  // The patterns a folder on the way can be named in: more than one component once a leading
  // `**` is set aside (every depth is tried anyway; kept, it would reach below any folder), those
  // an exception waives whole left out.
  const nested = patterns.flatMap((p) => {
    const parts = p.parts[0] === ANY_DEPTH ? p.parts.slice(1) : p.parts;
    if (parts.length < 2) return [];
    const whole = pathComponents(p.source);
    return exceptions.some((e) => matchesAnywhere(e.parts, whole)) ? [] : [{ ...p, parts }];
  });
  const matchBelow = (path: string): ProtectedPathMatch | undefined => {
    const direct = match(path);
    if (direct) return direct;
    const components = pathComponents(path);
    for (const p of nested) {
      const from = matcher(p.parts, components, true);
      for (let start = 0; start < components.length; start++) {
        if (from(0, start)) return { path, pattern: p.source };
      }
    }
    return undefined;
  };
  return Object.freeze({
    effect,
    patterns: Object.freeze(patterns.map((p) => p.source)),
    except: Object.freeze([...except]),
    writeFields,
    match,
    matchBelow,
    config: {
      effect,
      paths: sources.slice(BUILTIN_PROTECTED_PATHS.length + DEFAULT_PROTECTED_PATHS.length),
      except: [...except],
      writeFields: Object.fromEntries([...writeFields].map(([t, f]) => [t, [...f]])),
    },
  });
}

let basePatterns: ReadonlyMap<string, CompiledPattern> | undefined;

/**
 * A built-in or default pattern compiled once (every chain compiles them: they would cost most of
 * its protected paths' compilation each time); undefined for any other source. A compiled pattern
 * is immutable and its regular expressions carry no `g` or `y` state, so chains share them.
 */
function basePattern(source: string): CompiledPattern | undefined {
  basePatterns ??= new Map(
    [...BUILTIN_PROTECTED_PATHS, ...DEFAULT_PROTECTED_PATHS].map((s) => [
      s,
      compilePattern(s, 'protected path'),
    ]),
  );
  return basePatterns.get(source);
}

function compilePattern(source: string, what: string): CompiledPattern {
  const fail = (why: string) =>
    new ConfigError(`invalid ${what} ${JSON.stringify(source)}: ${why}`, {
      details: { pattern: source },
    });
  if (typeof source !== 'string' || source.length === 0) throw fail('empty');
  if (source.length > MAX_PATTERN_LENGTH) throw fail('too long');
  if (source.includes('\0')) throw fail('contains a NUL byte');
  if (source.startsWith('/') || source.startsWith('~'))
    throw fail('patterns match at every depth: write `.ssh`, not `/…/.ssh` or `~/.ssh`');
  const parts: Component[] = [];
  for (const raw of source.split(/[\\/]+/)) {
    if (raw === '' || raw === '.') continue;
    if (raw === '..') throw fail('`..` has no meaning in a pattern');
    if (raw === '**') {
      if (parts[parts.length - 1] !== ANY_DEPTH) parts.push(ANY_DEPTH);
      continue;
    }
    const name = normaliseComponent(raw);
    if (name === undefined) throw fail(`component ${JSON.stringify(raw)} names nothing`);
    parts.push(/[*?]/.test(name) ? globComponent(name) : name);
  }
  while (parts[parts.length - 1] === ANY_DEPTH) parts.pop();
  if (parts.length === 0 || parts.every((p) => p === ANY_DEPTH))
    throw fail('it would protect every path');
  return { source, parts };
}

/** A component pattern with `*` (any run of characters) and `?` (any one character). */
class Glob {
  private readonly chars: readonly string[];
  constructor(pattern: string) {
    this.chars = [...pattern];
  }

  /**
   * Whether `name` matches, in O(|pattern| × |name|) at worst whatever the stars — a regular
   * expression of `.*` runs backtracks exponentially (`*a*a*a*a*b` against a long run of `a`s held
   * the evaluator for 100 s). The classic greedy match: on a mismatch, the last star takes one
   * character more.
   */
  test(name: string): boolean {
    const p = this.chars;
    const s = [...name];
    let pi = 0;
    let si = 0;
    let star = -1;
    let resume = 0;
    while (si < s.length) {
      if (pi < p.length && (p[pi] === '?' || (p[pi] !== '*' && p[pi] === s[si]))) {
        pi++;
        si++;
      } else if (pi < p.length && p[pi] === '*') {
        star = pi++;
        resume = si;
      } else if (star >= 0) {
        pi = star + 1;
        si = ++resume;
      } else return false;
    }
    while (pi < p.length && p[pi] === '*') pi++;
    return pi === p.length;
  }
}

function globComponent(name: string): Glob {
  return new Glob(name);
}

/** Whether `parts` matches `components` starting at some depth (and covering what lies below). */
function matchesAnywhere(parts: readonly Component[], components: readonly string[]): boolean {
  const from = matcher(parts, components);
  for (let start = 0; start < components.length; start++) {
    if (from(0, start)) return true;
  }
  return false;
}

/**
 * Whether `parts` from the pi-th matches `components` from the ci-th, each (pi, ci) decided once
 * per matcher: `**` against a deep path is O(parts × components), not a product of its runs.
 * `prefix`: components that run out while parts remain match too (the path ends inside the
 * pattern: something below it may match the rest).
 */
function matcher(
  parts: readonly Component[],
  components: readonly string[],
  prefix = false,
): (pi: number, ci: number) => boolean {
  const failed = new Set<number>();
  const width = components.length + 1;
  const matchFrom = (pi: number, ci: number): boolean => {
    if (pi === parts.length) return true;
    const key = pi * width + ci;
    if (failed.has(key)) return false;
    const part = parts[pi]!;
    let matched: boolean;
    if (part === ANY_DEPTH) {
      // `**` takes k ≥ 0 components. Iterative, so the stack grows with the parts only; a start
      // found failed before ends the scan (it failed for every k from there on).
      matched = false;
      for (let k = ci; k <= components.length; k++) {
        if (k > ci && failed.has(pi * width + k)) break;
        if (matchFrom(pi + 1, k)) {
          matched = true;
          break;
        }
      }
      if (!matched)
        for (let k = ci; k <= components.length && !failed.has(pi * width + k); k++)
          failed.add(pi * width + k);
    } else if (ci === components.length) {
      matched = prefix;
    } else {
      const c = components[ci]!;
      matched = (typeof part === 'string' ? part === c : part.test(c)) && matchFrom(pi + 1, ci + 1);
    }
    if (!matched) failed.add(key);
    return matched;
  };
  return matchFrom;
}

/**
 * Code points that HFS+ ignores in file names, as git lists them (`is_hfs_dotgit`): `.g\u200cit`
 * is `.git` on a Mac.
 */
const IGNORABLE = /[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/**
 * One path component as the file systems git protects itself on would see it: NFC, without
 * ignorable code points, lower case, without the trailing dots and spaces and the `:stream`
 * suffix Windows drops, and the 8.3 short name `GIT~1` as `.git`. Undefined when nothing is left.
 */
function normaliseComponent(raw: string): string | undefined {
  let c = raw.normalize('NFC').replace(IGNORABLE, '').toLowerCase();
  const colon = c.indexOf(':');
  if (colon > 0) c = c.slice(0, colon);
  c = c.replace(/[. ]+$/, '');
  if (c === 'git~1') return '.git';
  return c.length === 0 ? undefined : c;
}

/**
 * A path's components, lexically normalised: `/` and `\` both separate, `.` and empty components
 * drop out, `..` removes the component before it, and each component is normalised like a
 * pattern's. Symlinks are the file system's business (see `@toolgate/worktree-guard`).
 */
function pathComponents(path: string): string[] {
  const out: string[] = [];
  for (const raw of path.split(/[\\/]+/)) {
    if (raw === '' || raw === '.') continue;
    if (raw === '..') {
      out.pop();
      continue;
    }
    const c = normaliseComponent(raw);
    if (c !== undefined) out.push(c);
  }
  return out;
}

/** The protected paths of a policy without any configuration: built-ins and defaults, `ask`. */
export const DEFAULT_PROTECTION: ProtectedPaths = compileProtectedPaths();
