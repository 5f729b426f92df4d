import {
  analyseAssignment,
  analyseProgram,
  MATCH_LITERAL,
  MATCH_ONE,
  MATCH_REST,
  type ArgvContext,
  type StdinSource,
  type UnseenCode,
  type WrittenFiles,
} from './shell-argv-analysis';
import { lexShell, isDotfilePath, SHELL_LIMITS, type ShellWord } from './shell-lexer';
import { basename, SHELL_KEYWORDS } from './shell-programs';

export type { UnseenCode } from './shell-argv-analysis';

export { MATCH_LITERAL, MATCH_ONE, MATCH_REST } from './shell-argv-analysis';

// Local copies: fillMask reads them once per word, and an imported binding is a property read.
const LITERAL = MATCH_LITERAL;
const ONE = MATCH_ONE;
const REST = MATCH_REST;

/** One segment of a command, ready for matching. */
export interface AnalysedSegment {
  /** Every word in order, redirections and leading assignments included: what allow patterns see. */
  readonly words: readonly ShellWord[];
  /** Per word, which allow-pattern tokens may match it ({@link MATCH_LITERAL} | ...). */
  readonly allowMask: Uint8Array;
  /**
   * The argvs deny and ask patterns are tried against: the words as written, the command without
   * redirections and assignments, its basename form, every program a wrapper runs and every
   * command inside a `sh -c` string, a pager option or an `-exec`. An unmatchable segment keeps
   * the candidates it has (a deny pattern that matches one still denies it).
   */
  readonly candidates: readonly (readonly string[])[];
  /**
   * Why the segment cannot be matched (no allow pattern covers it, deny and ask rules that do not
   * match it ask): text the lexer cannot pin down, or code the matcher cannot read (inline
   * interpreter code, a script file, a command built from input). Undefined when it can.
   */
  readonly unmatchable: string | undefined;
  /**
   * Files the segment may write: its redirection targets and the output operands and options
   * the program table knows (`sort -o F`, `sed -i F`, `tee F`, `dd of=F`), commands it runs
   * included. Relative paths are resolved against the directory earlier `cd`s of the command line
   * moved to (`cd .vscode && printf x > settings.json` writes `.vscode/settings.json`); after a
   * `cd` to a directory that is not a literal they are `dynamic`. Complete only when the segment is
   * matchable.
   */
  readonly writeTargets: readonly ShellWriteTarget[];
  /**
   * Code the segment runs that the matcher cannot see (a script file, a Makefile, a program named
   * by a path, written by the command itself or not in the table): deny and ask rules that could
   * match what runs ask, though the segment stays matchable for allow patterns.
   */
  readonly unseen: readonly UnseenCode[];
  /**
   * The directory the segment runs in, relative to the command's own (`''`), as earlier `cd` and
   * `pushd` segments of the command line left it; undefined when that is not known (`cd "$D"`).
   * Lexical, like the rest: `..` is resolved without looking at the file system.
   */
  readonly cwd: string | undefined;
}

/** A file a shell command may write. */
export interface ShellWriteTarget {
  /** The target as written, after quote removal (nothing expanded; relative to the command's cwd). */
  readonly path: string;
  /**
   * What writes it: a redirection operator (`>`, `>>`, `&>`, `<>`, ...) or the program and option
   * (`sort -o`, `sed -i`, `dd of=`, `tee`).
   */
  readonly via: string;
  /** The path holds an expansion, a glob or a leading `~`: the file actually written is not known. */
  readonly dynamic: boolean;
}

/** Every file a command may write, and whether the list is known to be complete. */
export interface ShellWriteTargets {
  readonly targets: readonly ShellWriteTarget[];
  /**
   * False when some segment cannot be analysed (substitutions, code the matcher cannot read, a
   * script file, a Makefile, a program the table does not know, ...):
   * the command may then write files that are not listed, and a caller must fail closed.
   */
  readonly complete: boolean;
}

const NON_PRINTABLE_ASCII = /[^\x21-\x7e]/;
const NETWORK_PSEUDO_FILE = /^\/dev\/(?:tcp|udp)\//;
const FD_DUPLICATION = /^[0-9]*[<>]&(?:[0-9]+|-)$/;
const NO_CANDIDATES: readonly (readonly string[])[] = [];
const NO_TARGETS: readonly ShellWriteTarget[] = [];
const NO_UNSEEN: readonly UnseenCode[] = [];
const NOTHING_WRITTEN: WrittenFiles = { names: new Set(), any: false };
/** Programs that copy, link or move files: the sources' names may become programs. */
const COPIERS = new Set(['cp', 'mv', 'ln', 'install', 'rsync', 'cp -t', 'mv -t', 'ln -t']);
/** Redirection operators that open their target for writing (`<>` opens it read-write). */
const WRITING_REDIRECT = /^[0-9]*(?:>|>>|>\||&>|&>>|>&|<>)$/;

/**
 * The files `command` may write, for checks on protected paths: every segment's redirection
 * targets and the output options and operands the program table knows, through wrappers and
 * `sh -c` strings. `complete` is false when a segment cannot be analysed.
 */
export function shellWriteTargets(command: string): ShellWriteTargets {
  if (typeof command !== 'string') return { targets: NO_TARGETS, complete: false };
  const targets: ShellWriteTarget[] = [];
  let complete = true;
  for (const seg of analyseShellCommand(command)) {
    // Code the matcher cannot see (a script, a Makefile) may write anything too.
    if (seg.unmatchable !== undefined || seg.unseen.length > 0) complete = false;
    for (const t of seg.writeTargets) targets.push(t);
  }
  return { targets, complete };
}

/** The redirection targets among `words` that are opened for writing. */
function redirectWriteTargets(words: readonly ShellWord[]): ShellWriteTarget[] {
  let out: ShellWriteTarget[] | undefined;
  for (let k = 0; k + 1 < words.length; k++) {
    const w = words[k]!;
    if (!w.redirect || !WRITING_REDIRECT.test(w.text)) continue;
    const target = words[k + 1]!;
    if (!target.redirectTarget) continue;
    (out ??= []).push({ path: target.text, via: w.text, dynamic: isDynamicPath(target) });
  }
  return out ?? (NO_TARGETS as ShellWriteTarget[]);
}

/** A path the shell may still change: an expansion, a glob or a tilde prefix. */
function isDynamicPath(word: ShellWord): boolean {
  return word.dynamic || word.glob || word.text.charCodeAt(0) === 126;
}

/**
 * Lexes and analyses a command. Never throws; problems become unmatchable segments.
 * @param depth nesting depth of `sh -c` strings (0 for the command itself)
 * @param written what the command line around a nested one wrote before it
 */
export function analyseShellCommand(
  command: string,
  depth = 0,
  written: WrittenFiles = NOTHING_WRITTEN,
): AnalysedSegment[] {
  if (depth > SHELL_LIMITS.maxNesting) {
    return [unmatchableSegment([], 'commands nested too deeply to analyse', '')];
  }
  const lexed = lexShell(command);
  const out: AnalysedSegment[] = new Array(lexed.length);
  let changedBy: string | undefined;
  // Where the segments run, relative to the command's directory (undefined: not known).
  let cwd: string | undefined = '';
  const dirStack: (string | undefined)[] = [];
  let names: Set<string> | undefined;
  let anyWritten = written.any;
  for (let s = 0; s < lexed.length; s++) {
    const seg = lexed[s]!;
    if (seg.unmatchable !== undefined) {
      out[s] = unmatchableSegment(seg.words, seg.unmatchable, cwd);
      if (mentionsDirectoryChange(seg.words)) cwd = undefined;
      continue;
    }
    const sofar: WrittenFiles =
      names === undefined && anyWritten === written.any
        ? written
        : { names: names ?? written.names, any: anyWritten };
    const analysed = analyseSegment(seg.words, depth, cwd, sofar);
    if (changedBy !== undefined && analysed.segment.unmatchable === undefined) {
      out[s] = {
        ...analysed.segment,
        allowMask: new Uint8Array(seg.words.length),
        unmatchable: `an earlier segment changes the shell's state (${changedBy})`,
      };
    } else {
      out[s] = analysed.segment;
    }
    if (changedBy === undefined && analysed.changes !== undefined) changedBy = analysed.changes;
    // What this segment wrote may be run by a later one under its own name.
    for (const t of analysed.segment.writeTargets) {
      if (t.dynamic) anyWritten = true;
      else (names ??= new Set(written.names)).add(basename(t.path.replace(/\/+$/, '')));
      if (COPIERS.has(t.via)) {
        // `cp /bin/rm /usr/local/bin/`: the copy keeps the source's name.
        let program = false;
        for (const w of seg.words) {
          if (w.redirect || w.redirectTarget || (!program && w.assignment)) continue;
          if (!program) program = true;
          else if (w.text.charCodeAt(0) !== 45)
            (names ??= new Set(written.names)).add(basename(w.text.replace(/\/+$/, '')));
        }
      }
    }
    // `chmod +x F` makes F a program a later segment may run.
    const core = analysed.segment.candidates[analysed.segment.candidates.length > 1 ? 1 : 0];
    if (core !== undefined && basename(core[0] ?? '') === 'chmod') {
      for (let k = 1; k < core.length; k++)
        (names ??= new Set(written.names)).add(basename(core[k]!.replace(/\/+$/, '')));
    }
    const moved = directoryChange(analysed.segment, cwd, dirStack);
    if (moved !== NO_CHANGE) cwd = moved;
  }
  return out;
}

const NO_CHANGE = Symbol('no directory change');

/**
 * Where `cd DIR`, `pushd DIR` and `popd` leave the command line: DIR joined to `cwd` when DIR is a
 * literal relative path, DIR itself when it is absolute, unknown (undefined) for `cd`, `cd -`,
 * `cd ~…`, an expansion or a glob. Other segments leave it where it was.
 */
function directoryChange(
  segment: AnalysedSegment,
  cwd: string | undefined,
  stack: (string | undefined)[],
): string | undefined | typeof NO_CHANGE {
  if (segment.unmatchable !== undefined)
    return mentionsDirectoryChange(segment.words) ? undefined : NO_CHANGE;
  let first: ShellWord | undefined;
  for (const w of segment.words) {
    if (w.redirect || w.redirectTarget || w.assignment) continue;
    first = w;
    break;
  }
  const program = first?.text;
  if (program !== 'cd' && program !== 'pushd' && program !== 'popd') return NO_CHANGE;
  const words = segment.words.filter((w) => !w.redirect && !w.redirectTarget);
  let k = 0;
  while (k < words.length && words[k]!.assignment) k++;
  if (program === 'popd') return stack.length > 0 ? stack.pop() : undefined;
  let i = k + 1;
  while (i < words.length && /^-[LPe@]+$/.test(words[i]!.text)) i++;
  if (words[i]?.text === '--') i++;
  const target = words[i];
  if (program === 'pushd') stack.push(cwd);
  if (target === undefined || target.dynamic || target.glob) return undefined;
  const dir = target.text;
  if (dir === '-' || dir.length === 0 || dir.charCodeAt(0) === 126) return undefined;
  if (program === 'pushd' && /^[+-][0-9]+$/.test(dir)) return undefined;
  if (dir.charCodeAt(0) === 47) return dir;
  if (cwd === undefined) return undefined;
  return cwd === '' ? dir : `${cwd}/${dir}`;
}

/**
 * Whether a segment the lexer or the analysis could not read may change directory (`cd "$(…)"`,
 * `(cd D && …)`, `{ cd D; …`, `do cd $d`): after it the directory is not known.
 */
function mentionsDirectoryChange(words: readonly ShellWord[]): boolean {
  for (const w of words) {
    if (w.redirect || w.redirectTarget) continue;
    if (w.text === 'cd' || w.text === 'pushd' || w.text === 'popd') return true;
  }
  return false;
}

/** A write target of a segment that runs in `cwd` (see {@link AnalysedSegment.cwd}). */
function inDirectory(t: ShellWriteTarget, cwd: string | undefined): ShellWriteTarget {
  if (cwd === '' || t.path.charCodeAt(0) === 47 || t.path.charCodeAt(0) === 126) return t;
  if (cwd === undefined)
    return { ...t, dynamic: true, via: `${t.via} after a cd to an unknown directory` };
  return { ...t, path: `${cwd}/${t.path}` };
}

function unmatchableSegment(
  words: readonly ShellWord[],
  reason: string,
  cwd: string | undefined,
): AnalysedSegment {
  const targets = redirectWriteTargets(words);
  return {
    words,
    allowMask: new Uint8Array(words.length),
    candidates: NO_CANDIDATES,
    unmatchable: reason,
    writeTargets: cwd === '' ? targets : targets.map((t) => inDirectory(t, cwd)),
    unseen: NO_UNSEEN,
    cwd,
  };
}

const nested = (command: string, depth: number, written: WrittenFiles) =>
  analyseShellCommand(command, depth, written);

function analyseSegment(
  words: readonly ShellWord[],
  depth: number,
  cwd: string | undefined,
  written: WrittenFiles,
): { segment: AnalysedSegment; changes: string | undefined } {
  const mask = new Uint8Array(words.length);
  const full: string[] = new Array(words.length);
  const core: string[] = [];
  const wordAt: number[] = [];
  let programIndex = -1;
  let assignments = 0;
  for (let k = 0; k < words.length; k++) {
    const w = words[k]!;
    full[k] = w.text;
    if (w.redirect || w.redirectTarget) continue;
    if (programIndex < 0) {
      if (w.assignment) {
        assignments++;
        continue;
      }
      programIndex = k;
    }
    core.push(w.text);
    wordAt.push(k);
  }
  fillMask(words, mask, programIndex);
  const writeTargets = redirectWriteTargets(words);

  if (programIndex < 0) {
    // Only assignments and redirections: `X=1`, `> file`.
    const segment: AnalysedSegment = {
      words,
      allowMask: mask,
      candidates: [full],
      unmatchable: undefined,
      writeTargets: cwd === '' ? writeTargets : writeTargets.map((t) => inDirectory(t, cwd)),
      unseen: NO_UNSEEN,
      cwd,
    };
    return { segment, changes: assignments > 0 ? 'variable assignment' : undefined };
  }

  const programWord = words[programIndex]!;
  const program = programWord.text;
  let reason: string | undefined;
  if (programWord.dynamic || programWord.glob) reason = 'the program name is not a literal';
  else if (program.length === 0) reason = 'empty program name';
  else if (NON_PRINTABLE_ASCII.test(program))
    reason = 'the program name contains non-ASCII or invisible characters';
  else if (SHELL_KEYWORDS.has(program)) reason = `shell keyword or compound command '${program}'`;
  if (reason !== undefined)
    return { segment: unmatchableSegment(words, reason, cwd), changes: undefined };

  const candidates: (readonly string[])[] = core.length !== full.length ? [full] : [];
  const ctx: ArgvContext = {
    words,
    argv: core,
    wordAt,
    mask,
    candidates,
    writeTargets: writeTargets === NO_TARGETS ? [] : (writeTargets as ShellWriteTarget[]),
    depth,
    stdin: stdinOf(words),
    nested,
    opaque: undefined,
    changes: undefined,
    placeholders: NO_PLACEHOLDERS,
    unseen: [],
    written,
  };
  for (let k = 0; k < programIndex; k++) {
    const w = words[k]!;
    if (w.assignment) analyseAssignment(ctx, w.text, -1);
  }
  analyseProgram(ctx, 0, core.length, undefined);
  const targets = ctx.writeTargets.length === 0 ? NO_TARGETS : ctx.writeTargets;
  const segment: AnalysedSegment = {
    words,
    allowMask: ctx.opaque === undefined ? mask : new Uint8Array(words.length),
    candidates,
    unmatchable: ctx.opaque,
    writeTargets: cwd === '' ? targets : targets.map((t) => inDirectory(t, cwd)),
    unseen: ctx.unseen.length === 0 ? NO_UNSEEN : ctx.unseen,
    cwd,
  };
  return { segment, changes: ctx.changes };
}

const NO_PLACEHOLDERS: readonly string[] = [];

/** Where the segment's stdin comes from: a here-string's text, a file, or nothing known. */
function stdinOf(words: readonly ShellWord[]): StdinSource {
  let source: StdinSource = NO_STDIN;
  for (let k = 0; k + 1 < words.length; k++) {
    const w = words[k]!;
    if (!w.redirect) continue;
    const target = words[k + 1]!;
    if (w.text === '<<<' || w.text === '0<<<') {
      source = target.dynamic
        ? { kind: 'unknown', what: 'a here-string with expansions' }
        : { kind: 'text', text: target.text };
    } else if (w.text === '<' || w.text === '0<' || w.text === '<>' || w.text === '0<>') {
      source = { kind: 'unknown', what: `the file '${target.text}'` };
    }
  }
  return source;
}

const NO_STDIN: StdinSource = { kind: 'none' };

/** Decides, per word, which allow-pattern tokens may stand for it (before the program table). */
function fillMask(words: readonly ShellWord[], mask: Uint8Array, programIndex: number): void {
  for (let k = 0; k < words.length; k++) {
    const w = words[k]!;
    const literal = !w.dynamic && !w.glob ? LITERAL : 0;
    // One word for sure: a literal, or a double-quoted expansion (`"$FILE"`).
    const one = !w.splits && !w.glob ? ONE : 0;
    if (w.redirect) {
      // Descriptor duplications (`2>&1`, `>&2`, `2>&-`) touch no file: a trailing `**` covers them.
      mask[k] = FD_DUPLICATION.test(w.text) ? LITERAL | REST : literal;
    } else if (w.redirectTarget) {
      // A wildcard never stands for a dotfile target: `echo ** > *` does not allow `> ~/.bashrc`.
      // Nor for bash's network pseudo-files (`> /dev/tcp/host/port` sends data off the machine).
      mask[k] =
        isDotfilePath(w.text) || NETWORK_PSEUDO_FILE.test(w.text)
          ? literal
          : literal | (literal ? one : 0) | REST;
    } else if (programIndex < 0 || k <= programIndex) {
      // Leading assignments and the program itself are only ever matched literally.
      mask[k] = literal;
    } else {
      // Unquoted expansions and globs may become any number of words: only `**` covers them.
      mask[k] = literal | one | REST;
    }
  }
}
