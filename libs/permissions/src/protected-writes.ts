import type { ProtectedPathMatch, ProtectedPaths } from './protected-paths';
import type { AnalysedSegment } from './shell-analysis';
import { basename, WRAPPERS } from './shell-programs';

/**
 * What a call would write that is protected: a match, a path the chain cannot pin down (a
 * redirection to `$OUT`), or nothing.
 */
export type ProtectedWrite =
  | { readonly kind: 'match'; readonly match: ProtectedPathMatch }
  | { readonly kind: 'unknown'; readonly why: string }
  | undefined;

/**
 * The protected path a tool's input writes, through the fields the policy names for the tool
 * (`write_file.path` by default). A field that is missing or not a string writes nothing here (the
 * tool's own validation refuses such input); an array of strings is checked element by element.
 */
export function protectedFieldWrite(
  protection: ProtectedPaths,
  toolName: string,
  input: unknown,
): ProtectedWrite {
  const fields = protection.writeFields.get(toolName);
  if (fields === undefined) return undefined;
  for (const field of fields) {
    const value = fieldValue(input, field);
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) {
      if (typeof v !== 'string') continue;
      const m = protection.match(v);
      if (m !== undefined) return { kind: 'match', match: m };
    }
  }
  return undefined;
}

function fieldValue(input: unknown, dotted: string): unknown {
  let v = input;
  for (const key of dotted.split('.')) {
    if (typeof v !== 'object' || v === null || !Object.prototype.hasOwnProperty.call(v, key))
      return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/**
 * Programs that only read the files they are given (and write to stdout): naming a protected path
 * as their argument is harmless. Every other program that names one may write it (`cp x .git/…`,
 * `tee`, `ln -s .git link`, an unknown script), so the call is treated as a write.
 */
const READERS: ReadonlySet<string> = new Set([
  'cat',
  'head',
  'tail',
  'ls',
  'stat',
  'file',
  'wc',
  'du',
  'grep',
  'egrep',
  'fgrep',
  'rg',
  'ag',
  'diff',
  'cmp',
  'md5sum',
  'sha1sum',
  'sha256sum',
  'sha512sum',
  'b2sum',
  'cksum',
  'readlink',
  'realpath',
  'basename',
  'dirname',
  'test',
  '[',
  'echo',
  'printf',
  'true',
  'false',
  'tree',
  'od',
  'hexdump',
  'strings',
  'nl',
  'cut',
]);

/** git subcommands that only read. `git config` writes `.git/config` unless it only reads. */
const GIT_READERS: ReadonlySet<string> = new Set([
  'status',
  'log',
  'diff',
  'show',
  'blame',
  'grep',
  'ls-files',
  'ls-tree',
  'cat-file',
  'rev-parse',
  'rev-list',
  'describe',
  'shortlog',
  'version',
  'help',
]);
const GIT_CONFIG_READS =
  /^(?:--get|--get-all|--get-regexp|--get-urlmatch|--list|-l|--show-origin|--show-scope|--get-color|--get-colorbool|get|list)$/;
/** git's global options that take a separate value. */
const GIT_VALUE_OPTIONS = /^(?:-C|-c|--git-dir|--work-tree|--namespace|--config-env|--exec-path)$/;

/** An output redirection operator (`>`, `2>>`, `&>`, `>|`, `<>`, `>&` before a file name). */
const OUTPUT_REDIRECT = /^[0-9]*(?:>|>>|>\||&>|&>>|<>|>&)$/;
const FD_DUPLICATION = /^[0-9]*[<>]&(?:[0-9]+|-)$/;
const INPUT_REDIRECT = /^[0-9]*(?:<|<<<)$/;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/;

/**
 * The protected path a shell command may write: the targets of its output redirections, the
 * arguments of any program that is not a known reader (wrapped and `sh -c` commands included), and
 * `.git/config` for a `git config` that sets something. A redirection whose target is an expansion
 * or a glob is `unknown`. Segments the matcher cannot analyse are scanned word by word: any word
 * that names a protected path counts.
 *
 * Lexical, like the rest of the chain; symlinks and files created by the command itself are the
 * sandbox's business (it binds every protected path read-only).
 */
export function protectedShellWrite(
  protection: ProtectedPaths,
  segments: readonly AnalysedSegment[],
): ProtectedWrite {
  let unknown: ProtectedWrite;
  for (const seg of segments) {
    // The segment's own list: redirections and the output options the program table knows.
    for (const t of seg.writeTargets) {
      const m = protection.match(t.path);
      if (m !== undefined) return { kind: 'match', match: m };
      if (t.dynamic) {
        unknown ??= {
          kind: 'unknown',
          why: `the file written through ${t.via} (${t.path}) is not a literal path`,
        };
      }
    }
    if (seg.unmatchable !== undefined) {
      for (const w of seg.words) {
        const m = mentioned(protection, w.text);
        if (m !== undefined) return { kind: 'match', match: m };
      }
      continue;
    }
    for (const argv of seg.candidates) {
      const m = argvWrite(protection, argv, seg.cwd);
      if (m !== undefined) return { kind: 'match', match: m };
    }
  }
  return unknown;
}

/**
 * Programs that move, replace or delete what they name: naming a directory above a protected path
 * (`mv .vscode x`, `rm -rf .github`) moves or removes the protected path with it.
 */
const MOVERS: ReadonlySet<string> = new Set([
  'mv',
  'rm',
  'rmdir',
  'rename',
  'unlink',
  'shred',
  'ln',
  'rsync',
  'install',
  'cp',
]);

/**
 * The protected path below `path` when `path` names a directory above one (`.github` above
 * `.github/workflows`): each pattern's proper tails are tried below it. Tails that are protected on
 * their own are skipped (every directory is above some `.git`).
 */
function protectedBelow(protection: ProtectedPaths, path: string): ProtectedPathMatch | undefined {
  let below = BELOW.get(protection);
  if (below === undefined) {
    below = { tails: [], heads: new Set(), anyHead: false };
    for (const source of protection.patterns) {
      const parts = source.split(/[\\/]+/).filter((c) => c !== '' && c !== '.' && c !== '**');
      for (let k = 1; k < parts.length; k++) {
        const tail = parts
          .slice(k)
          .map((c) => c.replace(/[*?]/g, 'x'))
          .join('/');
        if (protection.match(tail) !== undefined) continue;
        if (!below.tails.includes(tail)) below.tails.push(tail);
        // The component the path must end with for this tail to matter.
        const head = parts[k - 1]!;
        if (/[*?]/.test(head) || !/^[\x20-\x7e]+$/.test(head)) below.anyHead = true;
        else below.heads.add(head.toLowerCase());
      }
    }
    BELOW.set(protection, below);
  }
  if (below.tails.length === 0) return undefined;
  const base = path.replace(/[\\/]+$/, '');
  if (base === '' || base === '.' || base === '..') return undefined;
  const last = base.slice(Math.max(base.lastIndexOf('/'), base.lastIndexOf('\\')) + 1);
  // Most names are no pattern's parent: skip the matching unless normalisation could make them one.
  if (
    !below.anyHead &&
    !below.heads.has(last.toLowerCase()) &&
    /^[\x20-\x7e]+$/.test(last) &&
    !/[. ~:]/.test(last.slice(-1)) &&
    !last.includes('~') &&
    !last.includes(':')
  )
    return undefined;
  for (const tail of below.tails) {
    const m = protection.match(`${base}/${tail}`);
    if (m !== undefined) return { path, pattern: m.pattern };
  }
  return undefined;
}

const BELOW = new WeakMap<
  ProtectedPaths,
  { tails: string[]; heads: Set<string>; anyHead: boolean }
>();

/** `word` as seen from the command's directory, for a segment that runs in `cwd`. */
function inDirectory(word: string, cwd: string | undefined): string {
  if (cwd === undefined || cwd === '' || word.length === 0) return word;
  const c = word.charCodeAt(0);
  // Absolute, home-relative, options and `host:path` are not relative to the directory.
  if (c === 47 || c === 126 || c === 45 || word.includes(':') || word.includes('=')) return word;
  return `${cwd}/${word}`;
}

/** What one argv (as a candidate lists it: maybe with assignments and redirections) may write. */
function argvWrite(
  protection: ProtectedPaths,
  argv: readonly string[],
  cwd: string | undefined,
): ProtectedPathMatch | undefined {
  let i = 0;
  // Leading assignments and redirections (`X=1 > f cmd`) come before the program.
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (ASSIGNMENT.test(a) || FD_DUPLICATION.test(a)) continue;
    if (OUTPUT_REDIRECT.test(a)) {
      const target = argv[++i];
      const m = target === undefined ? undefined : protection.match(inDirectory(target, cwd));
      if (m !== undefined) return m;
      continue;
    }
    if (INPUT_REDIRECT.test(a)) {
      i++;
      continue;
    }
    break;
  }
  if (i >= argv.length) return undefined;
  const program = basename(argv[i]!);
  // A wrapper's own argv is not judged: the program it runs is another candidate of the segment.
  if (WRAPPERS.has(program)) return undefined;
  const reader = READERS.has(program) || (program === 'git' && gitOnlyReads(argv.slice(i + 1)));
  const mover =
    MOVERS.has(program) ||
    (program === 'git' && /^(?:mv|rm)$/.test(gitSubcommand(argv.slice(i + 1))?.name ?? ''));
  for (let k = reader ? i + 1 : i; k < argv.length; k++) {
    const a = argv[k]!;
    if (OUTPUT_REDIRECT.test(a) && k + 1 < argv.length) {
      const m = protection.match(inDirectory(argv[++k]!, cwd));
      if (m !== undefined) return m;
      continue;
    }
    if (INPUT_REDIRECT.test(a)) {
      k++;
      continue;
    }
    // Readers write only where an output option sends them (`git log --output=f`).
    if (reader && !a.startsWith('--output')) continue;
    const m =
      mentioned(protection, a) ?? (cwd ? mentioned(protection, inDirectory(a, cwd)) : undefined);
    if (m !== undefined) return m;
    if (mover && k > i && a.charCodeAt(0) !== 45) {
      const below = protectedBelow(protection, inDirectory(a, cwd));
      if (below !== undefined) return below;
    }
  }
  if (program === 'git' && gitConfigWrites(argv.slice(i + 1))) {
    return protection.match('.git/config');
  }
  return undefined;
}

/** The protected path a word names: itself, or the value of `--opt=path`, `-opath`, `host:path`. */
function mentioned(protection: ProtectedPaths, word: string): ProtectedPathMatch | undefined {
  const m = protection.match(word);
  if (m !== undefined) return m;
  const eq = word.indexOf('=');
  if (eq >= 0) {
    const v = protection.match(word.slice(eq + 1));
    if (v !== undefined) return { path: word, pattern: v.pattern };
  }
  if (word.length > 2 && word.charCodeAt(0) === 45 && word.charCodeAt(1) !== 45) {
    const v = protection.match(word.slice(2));
    if (v !== undefined) return { path: word, pattern: v.pattern };
  }
  const colon = word.indexOf(':');
  if (colon >= 0) {
    const v = protection.match(word.slice(colon + 1));
    if (v !== undefined) return { path: word, pattern: v.pattern };
  }
  return undefined;
}

/** The git subcommand after global options, with its arguments. */
function gitSubcommand(
  args: readonly string[],
): { name: string; rest: readonly string[] } | undefined {
  for (let k = 0; k < args.length; k++) {
    const a = args[k]!;
    if (GIT_VALUE_OPTIONS.test(a)) {
      k++;
      continue;
    }
    if (a.startsWith('-')) continue;
    return { name: a, rest: args.slice(k + 1) };
  }
  return undefined;
}

function gitOnlyReads(args: readonly string[]): boolean {
  const sub = gitSubcommand(args);
  if (sub === undefined) return true;
  // Global options that point git at another directory or config are not a reader's business.
  const globals = args.slice(0, args.length - sub.rest.length - 1);
  if (globals.some((g) => g !== '--no-pager' && g !== '-P' && g !== '--no-optional-locks'))
    return false;
  return GIT_READERS.has(sub.name);
}

function gitConfigWrites(args: readonly string[]): boolean {
  const sub = gitSubcommand(args);
  if (sub === undefined || sub.name !== 'config') return false;
  if (sub.rest.some((a) => GIT_CONFIG_READS.test(a))) return false;
  // `git config NAME` alone reads NAME; a value (or an action like --unset) writes.
  const positional = sub.rest.filter((a) => !a.startsWith('-'));
  const action = sub.rest.some((a) => a.startsWith('-') && a !== '--local' && a !== '--worktree');
  return positional.length >= 2 || action || positional[0] === 'set' || positional[0] === 'unset';
}
