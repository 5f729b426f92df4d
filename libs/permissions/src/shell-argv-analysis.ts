import type { ShellWord } from './shell-lexer';
import { isDotfilePath } from './shell-lexer';
import {
  assignmentEffect,
  basename,
  CODE_EVALUATORS,
  ENVIRONMENT_CHANGERS,
  gitConfigEffect,
  PLAIN_PROGRAMS,
  programSpec,
  SHELL_BUILTINS,
  SHELL_KEYWORDS,
  SYSTEM_PROGRAM_DIRS,
  type UnseenSpec,
  type OptionClassifier,
  type OptionEffect,
  type OptionKind,
  type ProgramSpec,
} from './shell-programs';
import { scanAwkProgram, scanSedScript } from './shell-script-scan';

/** A pattern literal may match this word. */
export const MATCH_LITERAL = 1;
/** A `*` in an allow pattern may stand for this word. */
export const MATCH_ONE = 2;
/** A trailing `**` in an allow pattern may cover this word. */
export const MATCH_REST = 4;

/** A file a command may write (see `shellWriteTargets`). */
export interface WriteTarget {
  readonly path: string;
  readonly via: string;
  readonly dynamic: boolean;
}

/**
 * Code a segment runs that the matcher cannot see: a script file, a Makefile's recipes, a program
 * named by a path or written by the command itself, a program the table does not know. Unlike
 * {@link ArgvContext.opaque} it leaves the segment matchable (an allow pattern may still allow it),
 * but a deny or ask rule that could match what runs, and does not match the segment itself, asks.
 */
export interface UnseenCode {
  /** What runs, for reasons. */
  readonly reason: string;
  /**
   * For a program the table does not know, its argv (program first): it may be a renamed copy of
   * any program or a wrapper, so a rule asks when its pattern's arguments match these arguments or
   * the pattern matches a suffix of them. Undefined when what runs could be anything: every deny
   * and ask rule on commands asks.
   */
  readonly argv?: readonly string[];
}

/** What a nested command line (`sh -c STRING`, a pager, `find -exec sh -c …`) analysed to. */
export interface NestedSegment {
  readonly candidates: readonly (readonly string[])[];
  readonly writeTargets: readonly WriteTarget[];
  readonly unmatchable: string | undefined;
  readonly unseen: readonly UnseenCode[];
}

/** What the segments before this one may have written: programs that may not be what they say. */
export interface WrittenFiles {
  /** Base names of the files (and of the sources of copies, links and renames) written earlier. */
  readonly names: ReadonlySet<string>;
  /** An earlier write's target is not a literal path: any program may be one it wrote. */
  readonly any: boolean;
}

/** Where a segment's standard input comes from, for programs that read code from it. */
export type StdinSource =
  | { readonly kind: 'none' }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'unknown'; readonly what: string };

/**
 * The state of one segment's analysis. Positions index `argv` (the segment's words without
 * redirections and leading assignments, program first); `wordAt` maps them to the segment's words,
 * whose allow masks are narrowed in place.
 */
export interface ArgvContext {
  readonly words: readonly ShellWord[];
  readonly argv: readonly string[];
  readonly wordAt: readonly number[];
  readonly mask: Uint8Array;
  readonly candidates: (readonly string[])[];
  readonly writeTargets: WriteTarget[];
  readonly depth: number;
  readonly stdin: StdinSource;
  /** Analyses a command line one level deeper (`sh -c STRING`). */
  readonly nested: (
    command: string,
    depth: number,
    written: WrittenFiles,
  ) => readonly NestedSegment[];
  /** Code the segment runs that the matcher cannot see (see {@link UnseenCode}). */
  readonly unseen: UnseenCode[];
  /** What earlier segments of the command line may have written. */
  readonly written: WrittenFiles;
  /** Why the segment runs code the matcher cannot read (it then always asks); the first reason. */
  opaque: string | undefined;
  /** The shell state an earlier segment changed (`export`, `source`, ...), for the ones after it. */
  changes: string | undefined;
  /** Text replaced with input at run time in the program being analysed (`find -exec … {}`). */
  placeholders: readonly string[];
}

/** Most candidate argvs one segment may produce before it is given up as unanalysable. */
const MAX_CANDIDATES = 256;
const LITERAL = MATCH_LITERAL;
const LITERAL_OR_ONE = MATCH_LITERAL | MATCH_ONE;
const NON_PRINTABLE_ASCII = /[^\x21-\x7e]/;
const ASSIGNMENT_OPERAND = /^[A-Za-z_][A-Za-z0-9_]*=/;
const STDIN_FILES = new Set(['/dev/stdin', '/dev/fd/0', '/proc/self/fd/0', '-']);
const STANDARD_STREAMS = new Set(['/dev/stdout', '/dev/stderr', '-']);

// ---------------------------------------------------------------------------------------------
// Compiled program specs.

interface Option {
  /** The option's name (its first spelling in the table), for routines and reasons. */
  readonly name: string;
  readonly kind: OptionKind | undefined;
  readonly classifier: OptionClassifier | undefined;
}

interface CompiledSpec {
  readonly spec: ProgramSpec;
  readonly short: ReadonlyMap<string, Option>;
  readonly long: ReadonlyMap<string, Option>;
  readonly singleDash: ReadonlyMap<string, Option>;
  readonly longNames: readonly string[];
  readonly subcommands: ReadonlyMap<string, CompiledSpec> | undefined;
}

const compiledSpecs = new WeakMap<ProgramSpec, CompiledSpec>();

function compile(spec: ProgramSpec): CompiledSpec {
  let c = compiledSpecs.get(spec);
  if (c !== undefined) return c;
  const short = new Map<string, Option>();
  const long = new Map<string, Option>();
  const singleDash = new Map<string, Option>();
  for (const [spellings, what] of Object.entries(spec.options ?? {})) {
    const names = spellings.split(' ');
    const option: Option = {
      name: names[0]!,
      kind: typeof what === 'string' ? what : undefined,
      classifier: typeof what === 'string' ? undefined : what,
    };
    for (const s of names) {
      if (s.startsWith('--')) long.set(s, option);
      else if (s.length === 2) short.set(s.slice(1), option);
      else singleDash.set(s, option);
    }
  }
  let subcommands: Map<string, CompiledSpec> | undefined;
  if (spec.subcommands !== undefined) {
    subcommands = new Map();
    for (const [name, sub] of Object.entries(spec.subcommands)) subcommands.set(name, compile(sub));
  }
  c = { spec, short, long, singleDash, longNames: [...long.keys()], subcommands };
  compiledSpecs.set(spec, c);
  return c;
}

/** 0: no value; 1: a value, attached or the next word; `attached`: only an attached value. */
function takes(option: Option): 0 | 1 | 'attached' {
  if (option.classifier !== undefined) return option.classifier.takes;
  switch (option.kind) {
    case 'value':
    case 'hazard-value':
    case 'output':
    case 'command':
    case 'code':
    case 'script':
      return 1;
    case 'optional':
    case 'hazard-optional':
    case 'output-optional':
    case 'command-optional':
    case 'script-optional':
      return 'attached';
    default:
      return 0;
  }
}

/** How much an option can do, to resolve an ambiguous abbreviation to the worst reading. */
function severity(option: Option): number {
  if (option.classifier !== undefined) return 5;
  switch (option.kind) {
    case 'code':
    case 'script':
    case 'script-optional':
    case 'stdin':
      return 6;
    case 'command':
    case 'command-optional':
      return 5;
    case 'output':
    case 'output-optional':
      return 4;
    case 'hazard':
    case 'hazard-value':
    case 'hazard-optional':
      return 3;
    case 'value':
      return 2;
    default:
      return 1;
  }
}

/** A long option by its spelling; GNU programs also take any unambiguous prefix. */
function longOption(cs: CompiledSpec, name: string): Option | undefined {
  const exact = cs.long.get(name);
  if (exact !== undefined || cs.spec.gnu !== true || name.length < 3) return exact;
  let best: Option | undefined;
  for (const known of cs.longNames) {
    if (!known.startsWith(name)) continue;
    const o = cs.long.get(known)!;
    // Several matches: getopt rejects the call, but the worst reading is the safe one.
    if (best === undefined || severity(o) > severity(best)) best = o;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Option parsing.

/** One option as it appeared on the command line. */
interface ParsedOption {
  readonly option: Option;
  /** The position of the option word. */
  readonly at: number;
  /** The position of its value when that is a word of its own; -1 otherwise. */
  readonly valueAt: number;
  readonly value: string | undefined;
  /** The option as written (`-c`, `--eval`), for reasons. */
  readonly spelling: string;
}

interface ParsedArgs {
  readonly options: ParsedOption[];
  readonly operands: number[];
  /** Where a wrapper's program starts (-1: none). */
  readonly programAt: number;
  /** The first option a strict program does not know. */
  readonly unknown: string | undefined;
}

/**
 * Parses the options of the program at `at` up to `end`. POSIX programs stop at the first operand,
 * GNU ones (`gnu`) at `--` only; a wrapper (`runs`) stops where its program starts.
 */
function parseArgs(ctx: ArgvContext, cs: CompiledSpec, at: number, end: number): ParsedArgs {
  const spec = cs.spec;
  const argv = ctx.argv;
  const options: ParsedOption[] = [];
  const operands: number[] = [];
  const permute = spec.gnu === true && spec.runs === undefined;
  const skipsAssignments = spec.operands === 'env' || spec.operands === 'sudo';
  let unknown: string | undefined;
  let sawUnknown = false;
  let done = false;
  let programAt = -1;
  for (let i = at + 1; i < end; i++) {
    const t = argv[i]!;
    if (done || t.length < 2 || t.charCodeAt(0) !== 45) {
      if (spec.runs !== undefined) {
        if (skipsAssignments && ASSIGNMENT_OPERAND.test(t)) {
          operands.push(i);
          continue;
        }
        if (operands.length - countAssignments(argv, operands) >= spec.runs) {
          programAt = i;
          break;
        }
        operands.push(i);
        // `setarch ARCH -R prog`: a GNU wrapper takes options after its own operands.
        if (spec.gnu !== true) done = true;
        continue;
      }
      operands.push(i);
      // An interpreter's first operand is its script and ends its options, unless an option we do
      // not know came first: it may have taken that word as its value (`node --opt V -e CODE`).
      if (!permute && !(sawUnknown && spec.operands === 'script')) done = true;
      continue;
    }
    if (t === '--') {
      done = true;
      continue;
    }
    if (t.charCodeAt(1) === 45) {
      const eq = t.indexOf('=');
      const name = eq < 0 ? t : t.slice(0, eq);
      const option = longOption(cs, name);
      if (option === undefined) {
        if (spec.strict === true) unknown ??= t;
        sawUnknown = true;
        continue;
      }
      if (eq >= 0) {
        options.push({ option, at: i, valueAt: -1, value: t.slice(eq + 1), spelling: name });
      } else if (takes(option) === 1 && i + 1 < end) {
        options.push({ option, at: i, valueAt: i + 1, value: argv[i + 1], spelling: name });
        i++;
      } else {
        options.push({ option, at: i, valueAt: -1, value: undefined, spelling: name });
      }
      continue;
    }
    const eq = t.indexOf('=');
    const single = cs.singleDash.get(eq < 0 ? t : t.slice(0, eq));
    if (single !== undefined) {
      const spelling = eq < 0 ? t : t.slice(0, eq);
      if (eq >= 0)
        options.push({ option: single, at: i, valueAt: -1, value: t.slice(eq + 1), spelling });
      else if (takes(single) === 1 && i + 1 < end) {
        options.push({ option: single, at: i, valueAt: i + 1, value: argv[i + 1], spelling });
        i++;
      } else options.push({ option: single, at: i, valueAt: -1, value: undefined, spelling });
      continue;
    }
    // A cluster of short options: `-abc`, `-ofile`, `-o file`.
    for (let j = 1; j < t.length; j++) {
      const letter = t[j]!;
      const option = cs.short.get(letter);
      if (option === undefined) {
        if (spec.strict === true) unknown ??= t;
        sawUnknown = true;
        continue;
      }
      const spelling = `-${letter}`;
      const arity = takes(option);
      if (arity === 0) {
        options.push({ option, at: i, valueAt: -1, value: undefined, spelling });
        continue;
      }
      const rest = t.slice(j + 1);
      if (rest.length > 0 || arity === 'attached') {
        options.push({
          option,
          at: i,
          valueAt: -1,
          value: rest.length > 0 ? rest : undefined,
          spelling,
        });
      } else if (i + 1 < end) {
        options.push({ option, at: i, valueAt: i + 1, value: argv[i + 1], spelling });
        i++;
      } else {
        options.push({ option, at: i, valueAt: -1, value: undefined, spelling });
      }
      break;
    }
  }
  return { options, operands, programAt, unknown };
}

function countAssignments(argv: readonly string[], operands: readonly number[]): number {
  let n = 0;
  for (const p of operands) if (ASSIGNMENT_OPERAND.test(argv[p]!)) n++;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Effects.

function restrict(ctx: ArgvContext, pos: number, allowed: number): void {
  const w = ctx.wordAt[pos];
  if (w !== undefined && w >= 0) ctx.mask[w]! &= allowed;
}

function opaque(ctx: ArgvContext, reason: string): void {
  ctx.opaque ??= reason;
}

/** Most unseen-code records one segment keeps (the first reasons are the ones reported). */
const MAX_UNSEEN = 32;

/** Code the segment runs that the matcher cannot see; `argv` for a program it does not know. */
function unseen(ctx: ArgvContext, reason: string, argv?: readonly string[]): void {
  if (ctx.unseen.length >= MAX_UNSEEN) {
    if (ctx.unseen.some((u) => u.argv === undefined)) return;
    ctx.unseen[MAX_UNSEEN - 1] = { reason };
    return;
  }
  ctx.unseen.push(argv === undefined ? { reason } : { reason, argv });
}

function wordAtPos(ctx: ArgvContext, pos: number): ShellWord | undefined {
  const w = ctx.wordAt[pos];
  return w === undefined || w < 0 ? undefined : ctx.words[w];
}

function pushCandidate(ctx: ArgvContext, argv: readonly string[]): void {
  if (ctx.candidates.length >= MAX_CANDIDATES) {
    opaque(ctx, 'too many wrapped commands to analyse');
    return;
  }
  ctx.candidates.push(argv);
}

/** A file the program writes; `pos` is the word that holds the path (for its expansion flags). */
function writes(ctx: ArgvContext, path: string, via: string, pos: number): void {
  const w = wordAtPos(ctx, pos);
  const dynamic = w === undefined ? false : w.dynamic || w.glob || path.charCodeAt(0) === 126;
  ctx.writeTargets.push({ path, via, dynamic: dynamic || path.charCodeAt(0) === 126 });
}

/**
 * A command line the program runs (`sh -c STRING`, a pager, `find -exec sh -c …`): analysed one
 * level deeper. Its candidates feed deny and ask rules, its write targets are the segment's, and
 * anything it cannot pin down makes the segment unmatchable.
 */
function runsCommand(ctx: ArgvContext, command: string, via: string, pos: number): void {
  const w = pos < 0 ? undefined : wordAtPos(ctx, pos);
  if (w !== undefined && w.dynamic) {
    opaque(ctx, `the command run by ${via} is not a literal`);
    return;
  }
  if (ctx.placeholders.some((p) => command.includes(p))) {
    opaque(ctx, `the command run by ${via} is built from its input`);
    return;
  }
  for (const seg of ctx.nested(command, ctx.depth + 1, ctx.written)) {
    for (const c of seg.candidates) pushCandidate(ctx, c);
    for (const t of seg.writeTargets) ctx.writeTargets.push(t);
    for (const u of seg.unseen) unseen(ctx, `inside ${via}: ${u.reason}`, u.argv);
    if (seg.unmatchable !== undefined) opaque(ctx, `inside ${via}: ${seg.unmatchable}`);
  }
}

/** Applies what each parsed option does. */
function applyOptions(
  ctx: ArgvContext,
  program: string,
  spec: ProgramSpec,
  options: readonly ParsedOption[],
): void {
  for (const o of options) {
    const kind = o.option.kind;
    if (kind === 'flag' || kind === 'value' || kind === 'optional') continue;
    const via = `${program} ${o.spelling}`;
    const hazard = () => {
      restrict(ctx, o.at, LITERAL);
      if (o.valueAt >= 0) restrict(ctx, o.valueAt, LITERAL_OR_ONE);
    };
    const valuePos = o.valueAt >= 0 ? o.valueAt : o.at;
    if (o.option.classifier !== undefined) {
      if (o.value === undefined) {
        hazard();
        continue;
      }
      applyEffect(ctx, o.option.classifier.classify(o.value), via, valuePos, hazard);
      continue;
    }
    switch (kind) {
      case 'hazard':
      case 'hazard-value':
      case 'hazard-optional':
        hazard();
        break;
      case 'output':
      case 'output-optional':
        hazard();
        if (o.value !== undefined && !STANDARD_STREAMS.has(o.value))
          writes(ctx, o.value, via, valuePos);
        break;
      case 'command':
      case 'command-optional':
        hazard();
        if (o.value !== undefined) runsCommand(ctx, o.value, via, valuePos);
        break;
      case 'code':
        hazard();
        opaque(ctx, `inline ${spec.language ?? program} code (${o.spelling}) cannot be matched`);
        break;
      case 'script':
      case 'script-optional':
        hazard();
        if (o.value !== undefined || o.option.kind === 'script')
          opaque(
            ctx,
            `${via} runs code or settings from ${o.value === undefined ? 'a file' : `'${o.value}'`}, which cannot be matched`,
          );
        break;
      case 'stdin':
        hazard();
        opaque(ctx, `${via} reads code from standard input, which cannot be matched`);
        break;
      default:
        break;
    }
  }
}

function applyEffect(
  ctx: ArgvContext,
  effect: OptionEffect,
  via: string,
  pos: number,
  hazard: () => void,
): void {
  switch (effect.kind) {
    case 'none':
      return;
    case 'hazard':
      hazard();
      return;
    case 'command':
      hazard();
      runsCommand(ctx, effect.command, via, pos);
      return;
    case 'output':
      hazard();
      writes(ctx, effect.path, via, pos);
      return;
    case 'opaque':
      hazard();
      opaque(ctx, effect.reason);
      return;
  }
}

/** `NAME=VALUE` before a program or after `env`/`sudo`: pagers, editors, preloaded code. */
export function analyseAssignment(ctx: ArgvContext, text: string, pos: number): void {
  const eq = text.indexOf('=');
  const name = text.slice(0, text[eq - 1] === '+' ? eq - 1 : eq);
  const effect = assignmentEffect(name, text.slice(eq + 1));
  if (effect.kind === 'none') return;
  if (effect.kind === 'command') {
    if (pos >= 0) restrict(ctx, pos, LITERAL);
    runsCommand(ctx, effect.command, `${name}=`, pos);
  } else if (effect.kind === 'opaque') opaque(ctx, effect.reason);
}

// ---------------------------------------------------------------------------------------------
// Programs.

/**
 * Analyses the program at `at` (its arguments up to `end`): adds its argv (and its basename form)
 * to the deny and ask candidates, narrows the allow mask of its hazardous options, and follows
 * whatever it runs: a wrapped program, a command string, a pager, `-exec`. `inner` is true for a
 * program another one runs (a wildcard never stands for its name either).
 */
export function analyseProgram(
  ctx: ArgvContext,
  at: number,
  end: number,
  inner: string | undefined,
  placeholders: readonly string[] = NO_PLACEHOLDERS,
): void {
  const argv = ctx.argv;
  const program = argv[at]!;
  const base = basename(program);
  pushCandidate(ctx, at === 0 && end === argv.length ? argv : argv.slice(at, end));
  if (base !== program) pushCandidate(ctx, [base, ...argv.slice(at + 1, end)]);
  if (inner !== undefined) {
    restrict(ctx, at, LITERAL);
    const w = wordAtPos(ctx, at);
    if (w !== undefined && (w.dynamic || w.glob)) {
      opaque(ctx, `the program run by ${inner} is not a literal`);
      return;
    }
    if (placeholders.some((p) => program.includes(p))) {
      opaque(ctx, `the program run by ${inner} comes from its input`);
      return;
    }
    if (program.length === 0 || NON_PRINTABLE_ASCII.test(program) || SHELL_KEYWORDS.has(program)) {
      opaque(ctx, `${inner} runs '${program}', which is not a simple program`);
      return;
    }
  }
  if (CODE_EVALUATORS.has(base)) {
    opaque(ctx, `'${base}' runs a string as shell code`);
    return;
  }
  const slash = program.lastIndexOf('/');
  if (slash >= 0 && !SYSTEM_PROGRAM_DIRS.has(slash === 0 ? '/' : program.slice(0, slash))) {
    // `./x`, `/tmp/x`, `bin/x`: a file, maybe a copy of a denied program or a script.
    unseen(
      ctx,
      `the program '${program}' is a file named by its path, which the matcher cannot read`,
    );
  } else if (!SHELL_BUILTINS.has(base) && (ctx.written.any || ctx.written.names.has(base))) {
    unseen(ctx, `the program '${program}' may be a file this command wrote`);
  }
  if (
    ctx.changes === undefined &&
    (ENVIRONMENT_CHANGERS.has(base) || (base === 'printf' && argv.slice(at, end).includes('-v')))
  ) {
    ctx.changes = base;
  }
  if (base === 'source' || base === '.') {
    sourceFile(ctx, base, at, end);
    return;
  }
  const spec = programSpec(base);
  if (spec === undefined) {
    if (!PLAIN_PROGRAMS.has(base) && !ENVIRONMENT_CHANGERS.has(base))
      unseen(ctx, `'${base}' is not a program the matcher knows`, argv.slice(at, end));
    return;
  }
  const outer = ctx.placeholders;
  ctx.placeholders = placeholders;
  try {
    analyseWith(ctx, compile(spec), base, at, end, placeholders);
  } finally {
    ctx.placeholders = outer;
  }
}

const NO_PLACEHOLDERS: readonly string[] = [];

/** Parses the options of `base` with its table entry and follows its operands. */
function analyseWith(
  ctx: ArgvContext,
  cs: CompiledSpec,
  base: string,
  at: number,
  end: number,
  placeholders: readonly string[],
): void {
  const spec = cs.spec;
  if (spec.operands === 'shell') {
    shellInvocation(ctx, base, at, end);
    return;
  }
  if (spec.operands === 'find') {
    findExpression(ctx, at, end);
    return;
  }
  if (spec.operands === 'git') {
    gitInvocation(ctx, cs, at, end);
    return;
  }
  let start = at;
  let preset: ParsedOption[] = [];
  if (spec.operands === 'tar') ({ start, preset } = tarOldStyle(ctx, cs, at, end));
  const parsed = parseArgs(ctx, cs, start, end);
  const options = preset.length > 0 ? [...preset, ...parsed.options] : parsed.options;
  applyOptions(ctx, base, spec, options);
  if (spec.unseen !== undefined) unseenBySpec(ctx, spec.unseen, base, options, parsed.operands);
  if (parsed.unknown !== undefined) {
    opaque(ctx, `unknown option '${parsed.unknown}' of '${base}'`);
    suffixCandidates(ctx, at, end);
    return;
  }
  // A subcommand with options of its own (`npm exec`, `git log`, `pipx run`).
  const first = parsed.operands[0];
  if (cs.subcommands !== undefined && first !== undefined) {
    const sub = cs.subcommands.get(ctx.argv[first]!);
    if (sub !== undefined) {
      analyseWith(ctx, sub, `${base} ${ctx.argv[first]!}`, first, end, placeholders);
      return;
    }
  }
  if (spec.runs !== undefined) {
    wrapped(ctx, base, spec, parsed, end, placeholders);
    return;
  }
  operandRule(ctx, spec, base, at, end, options, parsed.operands);
}

/** A program that runs code its command line does not show, unless its operands say otherwise. */
function unseenBySpec(
  ctx: ArgvContext,
  rule: UnseenSpec,
  base: string,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  if (rule.exceptOptions !== undefined) {
    for (const o of options)
      if (rule.exceptOptions.test(o.spelling) || rule.exceptOptions.test(o.option.name)) return;
  }
  const first = operands[0] === undefined ? '' : ctx.argv[operands[0]]!;
  if (rule.except !== undefined && rule.except.test(first)) return;
  unseen(ctx, `'${base}' runs ${rule.what}, which the matcher cannot read`);
}

/** A wrapper's program: analysed as if it stood alone. */
function wrapped(
  ctx: ArgvContext,
  base: string,
  spec: ProgramSpec,
  parsed: ParsedArgs,
  end: number,
  placeholders: readonly string[],
): void {
  for (const p of parsed.operands) {
    if (
      ASSIGNMENT_OPERAND.test(ctx.argv[p]!) &&
      (spec.operands === 'env' || spec.operands === 'sudo')
    ) {
      restrict(ctx, p, LITERAL);
      analyseAssignment(ctx, ctx.argv[p]!, p);
    }
  }
  if (base === 'command' && parsed.options.some((o) => o.spelling === '-v' || o.spelling === '-V'))
    return;
  if (spec.strict !== true)
    suffixCandidates(ctx, parsed.programAt < 0 ? end : parsed.programAt, end);
  if (base === 'xargs') {
    xargsProgram(ctx, parsed, end);
    return;
  }
  if (parsed.programAt < 0) {
    // Without a program these start an interactive shell, which reads commands from stdin.
    const shell =
      base === 'chroot' ||
      spec.shellWithout === true ||
      (spec.operands === 'sudo' &&
        parsed.options.some((o) => /^-[si]$|^--(?:shell|login)$/.test(o.option.name)));
    if (shell) opaque(ctx, `'${base}' starts a shell that reads commands from standard input`);
    return;
  }
  const p = parsed.programAt;
  if ((base === 'flock' || base === 'sg') && /^(?:-c|--command)$/.test(ctx.argv[p]!)) {
    // `flock FILE -c COMMAND`, `sg GROUP -c COMMAND`: the option comes after the operand.
    restrict(ctx, p, LITERAL);
    if (p + 1 < end) runsCommand(ctx, ctx.argv[p + 1]!, `'${base} -c'`, p + 1);
    else opaque(ctx, `'${base} -c' runs a command that cannot be located`);
    return;
  }
  analyseProgram(ctx, p, end, `'${base}'`, placeholders);
}

/** `xargs [options] [program [args]]`: the program (default `echo`) gets arguments from stdin. */
function xargsProgram(ctx: ArgvContext, parsed: ParsedArgs, end: number): void {
  let placeholder: string | undefined;
  for (const o of parsed.options) {
    if (o.option.name === '-I') placeholder = o.value;
    else if (o.option.name === '-i') placeholder = o.value ?? '{}';
  }
  if (parsed.programAt < 0) return;
  analyseProgram(
    ctx,
    parsed.programAt,
    end,
    "'xargs'",
    placeholder === undefined || placeholder === '' ? NO_PLACEHOLDERS : [placeholder],
  );
}

/** Every suffix of `argv[from, end)` that starts with a word that is not an option, as a candidate. */
function suffixCandidates(ctx: ArgvContext, from: number, end: number): void {
  for (let j = from; j < end; j++) {
    const w = ctx.argv[j]!;
    if (w.length === 0 || w.charCodeAt(0) === 45) continue;
    pushCandidate(ctx, ctx.argv.slice(j, end));
    if (ctx.candidates.length >= MAX_CANDIDATES) return;
  }
}

/** What a program's operands are, by its table entry. */
function operandRule(
  ctx: ArgvContext,
  spec: ProgramSpec,
  base: string,
  at: number,
  end: number,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  const argv = ctx.argv;
  switch (spec.operands) {
    case undefined:
      return;
    case 'script':
      interpreterOperands(ctx, spec, base, options, operands);
      return;
    case 'sed':
      sedOperands(ctx, options, operands);
      return;
    case 'awk':
      awkOperands(ctx, options, operands);
      return;
    case 'dd':
      for (const p of operands) {
        const a = argv[p]!;
        if (a.startsWith('of=')) {
          restrict(ctx, p, LITERAL);
          writes(ctx, a.slice(3), 'dd of=', p);
        }
      }
      return;
    case 'all-output':
      for (const p of operands) outputOperand(ctx, p, base);
      if (base === 'script' && !options.some((o) => o.option.name === '-c'))
        opaque(ctx, "'script' starts a shell that reads commands from standard input");
      return;
    case 'editor':
      // `vim +CMD`, `less +CMD`: an editor or pager command run at start-up.
      for (const p of operands) {
        const a = argv[p]!;
        if (a.length > 1 && a.charCodeAt(0) === 43 && !/^\+[0-9]+$/.test(a)) {
          restrict(ctx, p, LITERAL);
          opaque(ctx, `inline ${spec.language ?? base} commands (+) cannot be matched`);
        }
      }
      return;
    case 'last-output':
      if (operands.length >= 2 && !options.some((o) => o.option.name === '-t'))
        outputOperand(ctx, operands[operands.length - 1]!, base);
      return;
    case 'second-output':
      if (operands.length >= 2) outputOperand(ctx, operands[1]!, base);
      return;
    case 'join':
      joinedCommand(ctx, base, options, operands, end);
      return;
    case 'ssh':
      if (operands.length >= 2)
        runsCommand(
          ctx,
          operands
            .slice(1)
            .map((p) => argv[p]!)
            .join(' '),
          `'ssh'`,
          -1,
        );
      return;
    case 'docker':
      for (let k = 0; k < operands.length; k++) {
        const p = operands[k]!;
        if (/^(?:run|exec|create|debug|start|attach|cp|build)$/.test(argv[p]!)) {
          restrict(ctx, p, LITERAL);
          suffixCandidates(ctx, p + 1, end);
          return;
        }
      }
      return;
    case 'npm':
      npmOperands(ctx, base, operands, end);
      return;
    case 'make':
      for (const p of operands) {
        if (ASSIGNMENT_OPERAND.test(argv[p]!)) {
          restrict(ctx, p, LITERAL);
          opaque(
            ctx,
            `the make variable override '${argv[p]!.slice(0, argv[p]!.indexOf('='))}=…' changes the commands its recipes run`,
          );
        }
      }
      return;
    case 'gh':
      ghOperands(ctx, operands);
      return;
    case 'tar':
      tarOperands(ctx, options);
      return;
    case 'su':
      suOperands(ctx, base, options, operands, end);
      return;
    case 'all-code':
      for (let p = at + 1; p < end; p++) restrict(ctx, p, LITERAL);
      if (spec.language !== undefined && ctx.opaque === undefined)
        opaque(ctx, `${base} runs ${spec.language} code the matcher cannot read`);
      return;
    case 'stdin-code':
      // `ed`, `ex`, `at`: commands (`!cmd` among them) come from standard input.
      if (!options.some((o) => o.option.kind === 'script' || o.option.kind === 'code'))
        stdinCode(ctx, base, spec.language);
      return;
    case 'socat':
      for (const p of operands) socatAddress(ctx, p);
      return;
    case 'capsh':
      capshInvocation(ctx, at, end);
      return;
    case 'commands':
      for (const p of operands) {
        restrict(ctx, p, LITERAL);
        runsCommand(ctx, argv[p]!, `'${base}'`, p);
      }
      return;
    default:
      return;
  }
}

function outputOperand(ctx: ArgvContext, p: number, base: string): void {
  const path = ctx.argv[p]!;
  if (STANDARD_STREAMS.has(path)) return;
  if (isDotfilePath(path)) restrict(ctx, p, LITERAL);
  writes(ctx, path, base, p);
}

/** Code read from stdin: a shell's here-string is analysed; anything else cannot be. */
function stdinCode(ctx: ArgvContext, base: string, language: string | undefined): void {
  if (language === 'shell' && ctx.stdin.kind === 'text') {
    runsCommand(ctx, ctx.stdin.text, `'${base} <<<'`, -1);
    return;
  }
  const what = language === 'shell' ? 'commands' : `${language ?? base} code`;
  const from = ctx.stdin.kind === 'unknown' ? ctx.stdin.what : 'standard input';
  opaque(ctx, `${base} reads ${what} from ${from}, which cannot be matched`);
}

/** `sh`, `bash -c STRING`, `bash -o errexit -c STRING`, `sh -c -- STRING`, `bash script.sh`, `sh`. */
function shellInvocation(ctx: ArgvContext, base: string, at: number, end: number): void {
  const argv = ctx.argv;
  let command = false;
  let stdin = false;
  let i = at + 1;
  for (; i < end; i++) {
    const t = argv[i]!;
    if (t === '-' || t === '--') {
      i++;
      break;
    }
    const c0 = t.charCodeAt(0);
    if (t.length < 2 || (c0 !== 45 && c0 !== 43)) break;
    restrict(ctx, i, LITERAL);
    if (t.startsWith('--')) {
      const eq = t.indexOf('=');
      const name = eq < 0 ? t : t.slice(0, eq);
      if (SHELL_LONG_FLAGS.has(name)) continue;
      const value = eq >= 0 ? t.slice(eq + 1) : argv[i + 1];
      if (eq < 0) i++;
      if (name === '--rcfile' || name === '--init-file') {
        opaque(ctx, `${base} ${name} runs the file '${value ?? ''}', which cannot be matched`);
      } else if (name === '--init-command' || name === '--command') {
        if (value === undefined) opaque(ctx, `${base} ${name} has no command`);
        else runsCommand(ctx, value, `'${base} ${name}'`, i);
      } else {
        opaque(ctx, `unknown option '${t}' of '${base}'`);
      }
      continue;
    }
    for (let j = 1; j < t.length; j++) {
      const letter = t[j];
      if (letter === 'c') command = true;
      else if (letter === 's' || letter === 'i') stdin = true;
      else if (letter === 'o' || letter === 'O') {
        i++;
        restrict(ctx, i, LITERAL);
      } else if (letter === 'C' && base === 'fish') {
        i++;
        if (i < end) runsCommand(ctx, argv[i]!, `'fish -C'`, i);
      }
    }
  }
  if (command) {
    if (i >= end) opaque(ctx, `'${base} -c' runs a command that cannot be located`);
    else runsCommand(ctx, argv[i]!, `'${base} -c'`, i);
  } else if (stdin || i >= end) {
    stdinCode(ctx, base, 'shell');
  } else {
    opaque(ctx, `the script file '${argv[i]!}' run by ${base} cannot be matched`);
  }
}

/** Long options of the shells that take no value. */
const SHELL_LONG_FLAGS = new Set([
  '--login',
  '--norc',
  '--noprofile',
  '--posix',
  '--restricted',
  '--verbose',
  '--version',
  '--help',
  '--noediting',
  '--debugger',
  '--dump-strings',
  '--dump-po-strings',
  '--protected',
  '--pretty-print',
  '--no-config',
  '--private',
  '--interactive',
  '--no-execute',
]);

/** `source FILE` / `. FILE`. */
function sourceFile(ctx: ArgvContext, base: string, at: number, end: number): void {
  let p = at + 1;
  if (ctx.argv[p] === '--') p++;
  if (p >= end) return;
  const file = ctx.argv[p]!;
  if (STDIN_FILES.has(file)) stdinCode(ctx, base, 'shell');
  else opaque(ctx, `'${base}' runs the script file '${file}', which cannot be matched`);
}

/** `python [options] [script | -c CODE | -m MODULE | -] [args]` and the other interpreters. */
function interpreterOperands(
  ctx: ArgvContext,
  spec: ProgramSpec,
  base: string,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  const inPlace = options.some(
    (o) => o.option.name === '-i' && o.option.kind === 'hazard-optional',
  );
  const hasSource = options.some(
    (o) =>
      o.option.kind === 'code' ||
      o.option.kind === 'script' ||
      o.option.kind === 'stdin' ||
      NOT_FROM_STDIN.has(o.spelling),
  );
  let files = operands;
  for (const o of options) {
    // `python -m MODULE`, `node --require M`, `node --run SCRIPT`, `ruby -r LIB`: code from files.
    if (o.option.kind === 'hazard-value' && o.value !== undefined)
      unseen(
        ctx,
        `${base} ${o.spelling} runs code from '${o.value}', which the matcher cannot read`,
      );
    else if (o.spelling === '--test')
      unseen(ctx, `${base} --test runs test files the matcher cannot read`);
  }
  if (!hasSource) {
    const script = operands[0];
    if (script === undefined || STDIN_FILES.has(ctx.argv[script]!)) {
      stdinCode(ctx, base, spec.language);
      return;
    }
    unseen(
      ctx,
      `${base} runs the script file '${ctx.argv[script]!}', which the matcher cannot read`,
    );
    files = operands.slice(1);
  }
  if (inPlace) for (const p of files) outputOperand(ctx, p, `${base} -i`);
}

/** Interpreter options after which no code is read from stdin (a module, a test run, a version). */
const NOT_FROM_STDIN = new Set([
  '-m',
  '--run',
  '-f',
  '--test',
  '-v',
  '-V',
  '--version',
  '-h',
  '-?',
  '--help',
  '--help-all',
  '--help-env',
  '--help-xoptions',
]);

/**
 * The inline scripts of a sed or awk call: every `-e` value; without one, and without a script
 * file, the first operand (and `files` are the operands after it).
 */
function inlineScripts(
  ctx: ArgvContext,
  options: readonly ParsedOption[],
  operands: readonly number[],
  isScriptFile: (o: ParsedOption) => boolean,
): { scripts: { text: string; pos: number }[]; files: readonly number[] } {
  const scripts: { text: string; pos: number }[] = [];
  let fromFile = false;
  for (const o of options) {
    if (o.option.name === '-e' && o.value !== undefined)
      scripts.push({ text: o.value, pos: o.valueAt >= 0 ? o.valueAt : o.at });
    else if (isScriptFile(o)) fromFile = true;
  }
  if (scripts.length > 0 || fromFile || operands.length === 0) return { scripts, files: operands };
  scripts.push({ text: ctx.argv[operands[0]!]!, pos: operands[0]! });
  return { scripts, files: operands.slice(1) };
}

/** Whether the script word at `pos` is a literal; one that is not makes the segment opaque. */
function literalScript(ctx: ArgvContext, pos: number, what: string): boolean {
  const w = wordAtPos(ctx, pos);
  if (w === undefined || !w.dynamic) return true;
  restrict(ctx, pos, LITERAL);
  opaque(ctx, `${what} is not a literal`);
  return false;
}

/** `sed [options] SCRIPT [file...]`, `sed -e SCRIPT ...`, `sed -i ...`. */
function sedOperands(
  ctx: ArgvContext,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  const { scripts, files } = inlineScripts(ctx, options, operands, (o) => o.option.name === '-f');
  const inPlace = options.some((o) => o.option.name === '-i');
  if (inPlace) for (const p of files) outputOperand(ctx, p, 'sed -i');
  if (options.some((o) => o.option.name === '--sandbox')) return;
  for (const { text, pos } of scripts) {
    if (!literalScript(ctx, pos, 'the sed script')) continue;
    const scan = scanSedScript(text);
    if (scan.error !== undefined) {
      restrict(ctx, pos, LITERAL);
      opaque(ctx, `the sed script cannot be parsed (${scan.error})`);
      continue;
    }
    if (scan.executesInput) {
      restrict(ctx, pos, LITERAL);
      opaque(ctx, 'the sed script runs its input as a command (e)');
    }
    for (const c of scan.commands) {
      restrict(ctx, pos, LITERAL);
      runsCommand(ctx, c, "sed's e command", -1);
    }
    for (const f of scan.writes) {
      if (STANDARD_STREAMS.has(f)) continue;
      restrict(ctx, pos, LITERAL);
      ctx.writeTargets.push({ path: f, via: 'sed w', dynamic: f.charCodeAt(0) === 126 });
    }
  }
}

/** `awk [options] PROGRAM [file | var=value ...]`, `awk -f FILE ...`. */
function awkOperands(
  ctx: ArgvContext,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  const { scripts } = inlineScripts(ctx, options, operands, (o) => o.option.kind === 'script');
  for (const { text, pos } of scripts) {
    if (!literalScript(ctx, pos, 'the awk program')) continue;
    const scan = scanAwkProgram(text);
    if (scan.runsCommands || scan.writesFiles || scan.readsFiles || scan.indirect)
      restrict(ctx, pos, LITERAL);
    if (scan.runsCommands) opaque(ctx, 'the awk program runs commands (system() or a pipe)');
    else if (scan.indirect) opaque(ctx, "the awk program makes indirect calls or loads code ('@')");
    else if (scan.writesFiles) opaque(ctx, 'the awk program writes files it names (print >)');
  }
}

/** `find [-H|-L|-P] [paths] [expression]`: `-exec … ;`, `-fprint FILE`, `-delete`, .... */
function findExpression(ctx: ArgvContext, at: number, end: number): void {
  const argv = ctx.argv;
  // Every suffix is a candidate too, so deny rules and path checks see the starting points with
  // whatever the expression does to them.
  suffixCandidates(ctx, at + 1, end);
  let i = at + 1;
  while (i < end && /^-(?:[HLP]|D|O[0-9]*)$/.test(argv[i]!)) i += argv[i] === '-D' ? 2 : 1;
  const paths: number[] = [];
  while (i < end && !/^[-(!),]/.test(argv[i]!)) paths.push(i++);
  for (; i < end; i++) {
    const t = argv[i]!;
    switch (t) {
      case '-exec':
      case '-execdir':
      case '-ok':
      case '-okdir': {
        restrict(ctx, i, LITERAL);
        let j = i + 1;
        while (j < end && !(argv[j] === ';' || (argv[j] === '+' && argv[j - 1] === '{}'))) j++;
        if (j > i + 1) analyseProgram(ctx, i + 1, j, `'find ${t}'`, FIND_PLACEHOLDERS);
        i = j;
        break;
      }
      case '-delete':
        restrict(ctx, i, LITERAL);
        for (const p of paths.length > 0 ? paths : [-1])
          writes(ctx, p < 0 ? '.' : argv[p]!, 'find -delete', p);
        break;
      case '-fprint':
      case '-fprint0':
      case '-fls':
      case '-fprintf':
        restrict(ctx, i, LITERAL);
        if (i + 1 < end) {
          restrict(ctx, i + 1, LITERAL_OR_ONE);
          writes(ctx, argv[i + 1]!, `find ${t}`, i + 1);
        }
        i += t === '-fprintf' ? 2 : 1;
        break;
      default:
        break;
    }
  }
}

const FIND_PLACEHOLDERS: readonly string[] = ['{}'];

/** `tar xzf F`: the old style, a first word of option letters whose values follow in order. */
function tarOldStyle(
  ctx: ArgvContext,
  cs: CompiledSpec,
  at: number,
  end: number,
): { start: number; preset: ParsedOption[] } {
  const first = ctx.argv[at + 1];
  if (first === undefined || !/^[A-Za-z]+$/.test(first)) return { start: at, preset: [] };
  const preset: ParsedOption[] = [];
  let next = at + 2;
  for (const letter of first) {
    const option = cs.short.get(letter);
    if (option === undefined) continue;
    if (takes(option) === 1 && next < end) {
      preset.push({ option, at: at + 1, valueAt: next, value: ctx.argv[next], spelling: letter });
      next++;
    } else preset.push({ option, at: at + 1, valueAt: -1, value: undefined, spelling: letter });
  }
  const modes = first.replace(/[^cruA]/g, '');
  if (modes.length > 0) preset.push(TAR_CREATE(at + 1));
  // Continue after the values the letters took (the parse starts after `start`).
  return { start: next - 1, preset };
}

const TAR_MODE: Option = { name: 'create-mode', kind: 'flag', classifier: undefined };
const TAR_CREATE = (at: number): ParsedOption => ({
  option: TAR_MODE,
  at,
  valueAt: -1,
  value: undefined,
  spelling: 'c',
});

/** `tar -cf ARCHIVE`: in create/append/update mode the archive is written. */
function tarOperands(ctx: ArgvContext, options: readonly ParsedOption[]): void {
  const creates = options.some((o) => o.option === TAR_MODE || o.option.name === '-c');
  if (!creates) return;
  for (const o of options) {
    if (o.option.name === '-f' && o.value !== undefined && !STANDARD_STREAMS.has(o.value))
      writes(ctx, o.value, 'tar -f', o.valueAt >= 0 ? o.valueAt : o.at);
  }
}

/** `watch CMD...`, `entr -s CMD`, `parallel CMD ::: ARGS`, `bun exec CMD`: a command line. */
function joinedCommand(
  ctx: ArgvContext,
  base: string,
  options: readonly ParsedOption[],
  operands: readonly number[],
  end: number,
): void {
  const argv = ctx.argv;
  if (operands.length === 0) {
    if (base === 'parallel') opaque(ctx, "'parallel' runs commands read from its input");
    return;
  }
  const first = operands[0]!;
  const asArgv =
    (base === 'watch' && options.some((o) => o.option.name === '-x')) ||
    (base === 'entr' && !options.some((o) => o.option.name === '-s'));
  if (asArgv) {
    analyseProgram(ctx, first, end, `'${base}'`);
    return;
  }
  let last = end;
  if (base === 'parallel') {
    last = first;
    while (last < end && !/^:{3,4}\+?$/.test(argv[last]!)) last++;
  }
  // No option spells out that these words are a command line: a wildcard never stands for them.
  for (let p = first; p < last; p++) restrict(ctx, p, LITERAL);
  runsCommand(ctx, argv.slice(first, last).join(' '), `'${base}'`, -1);
}

/** `npm exec`, `npm pkg set scripts.x=CMD`, `npm config set script-shell CMD`, ... */
function npmOperands(
  ctx: ArgvContext,
  base: string,
  operands: readonly number[],
  end: number,
): void {
  const argv = ctx.argv;
  const sub = operands[0] === undefined ? undefined : argv[operands[0]]!;
  if (sub === 'exec' || sub === 'x' || sub === 'dlx') {
    // pnpm/yarn forms without a table entry of their own.
    const p = operands[1];
    if (p !== undefined) analyseProgram(ctx, p, end, `'${base} ${sub}'`);
    suffixCandidates(ctx, operands[0]! + 1, end);
    return;
  }
  if (sub === 'pkg' && argv[operands[1] ?? -1] === 'set') {
    for (const p of operands.slice(2)) {
      const m = /^scripts\.([^=]+)=(.*)$/s.exec(argv[p]!);
      if (m !== null) {
        restrict(ctx, p, LITERAL);
        runsCommand(ctx, m[2]!, `'${base} pkg set scripts.${m[1]!}'`, p);
      }
    }
    return;
  }
  if (sub === 'set-script' && operands.length >= 3) {
    restrict(ctx, operands[2]!, LITERAL);
    runsCommand(ctx, argv[operands[2]!]!, `'${base} set-script'`, operands[2]!);
    return;
  }
  if ((sub === 'config' && argv[operands[1] ?? -1] === 'set') || sub === 'set') {
    const rest = operands.slice(sub === 'set' ? 1 : 2).map((p) => argv[p]!);
    const key = (rest[0] ?? '').split('=')[0]!;
    if (
      /^(?:script-shell|shell|editor|browser|node-options|init-module|userconfig|globalconfig|prefix|git|ignore-scripts)$/.test(
        key,
      )
    ) {
      for (const p of operands) restrict(ctx, p, LITERAL);
      opaque(ctx, `'${base} config set ${key}' changes what later ${base} commands run`);
    }
  }
}

/** `gh alias set NAME EXPANSION [--shell]`, `gh alias import FILE`, `gh config set pager CMD`. */
function ghOperands(ctx: ArgvContext, operands: readonly number[]): void {
  const argv = ctx.argv;
  operands = operands.filter((p) => argv[p]!.charCodeAt(0) !== 45);
  const words = operands.map((p) => argv[p]!);
  if (words[0] === 'alias' && words[1] === 'set' && words.length >= 4) {
    const p = operands[3]!;
    const expansion = argv[p]!;
    const shell = argv.includes('--shell') || argv.includes('-s') || expansion.startsWith('!');
    restrict(ctx, p, LITERAL);
    runsCommand(ctx, shell ? expansion.replace(/^!/, '') : `gh ${expansion}`, "'gh alias set'", p);
  } else if (words[0] === 'alias' && words[1] === 'import') {
    opaque(ctx, "'gh alias import' defines commands from a file, which cannot be matched");
  } else if (words[0] === 'config' && words[1] === 'set' && words.length >= 4) {
    if (/^(?:pager|editor|browser)$/.test(words[2]!)) {
      restrict(ctx, operands[3]!, LITERAL);
      runsCommand(ctx, words[3]!, `'gh config set ${words[2]!}'`, operands[3]!);
    }
  } else if (words[0] === 'extension' || words[0] === 'ext') {
    for (const p of operands) restrict(ctx, p, LITERAL);
  }
}

/** `su [options] [-] [user [shell args]]`, `runuser -u user [--] program ...`. */
function suOperands(
  ctx: ArgvContext,
  base: string,
  options: readonly ParsedOption[],
  operands: readonly number[],
  end: number,
): void {
  if (options.some((o) => o.option.name === '-c')) return;
  if (options.some((o) => o.option.name === '-u')) {
    const p = operands[0];
    if (p !== undefined) analyseProgram(ctx, p, end, `'${base}'`);
    return;
  }
  const rest = operands.filter((p) => ctx.argv[p] !== '-');
  // After the user, the arguments go to the user's shell.
  if (rest.length <= 1) {
    opaque(ctx, `'${base}' starts a shell that reads commands from standard input`);
    return;
  }
  shellInvocation(ctx, 'sh', rest[0]!, end);
}

/** git: global options (`-c KEY=VALUE`), then a subcommand with options of its own. */
function gitInvocation(ctx: ArgvContext, cs: CompiledSpec, at: number, end: number): void {
  const argv = ctx.argv;
  const parsed = parseArgs(ctx, cs, at, end);
  applyOptions(ctx, 'git', cs.spec, parsed.options);
  if (parsed.unknown !== undefined) {
    restrict(ctx, at + 1, LITERAL);
    opaque(ctx, `unknown option '${parsed.unknown}' of 'git'`);
  }
  const subAt = parsed.operands[0];
  if (subAt === undefined) return;
  const sub = argv[subAt]!;
  const spec = cs.subcommands?.get(sub);
  let subOptions: readonly ParsedOption[] = [];
  let operands: readonly number[] = [];
  if (spec !== undefined) {
    const p = parseArgs(ctx, spec, subAt, end);
    applyOptions(ctx, `git ${sub}`, spec.spec, p.options);
    subOptions = p.options;
    operands = p.operands;
  } else {
    for (let p = subAt + 1; p < end; p++)
      if (argv[p]!.charCodeAt(0) !== 45) (operands as number[]).push(p);
  }
  for (let p = subAt + 1; p < end; p++) {
    if (/^(?:ext|fd)::/.test(argv[p]!)) {
      restrict(ctx, p, LITERAL);
      opaque(
        ctx,
        `the git transport '${argv[p]!.slice(0, argv[p]!.indexOf('::') + 2)}' runs a command`,
      );
    }
  }
  if (sub === 'config') gitConfig(ctx, subAt, subOptions, operands);
  else if (sub === 'bisect' && argv[operands[0] ?? -1] === 'run' && operands.length >= 2)
    analyseProgram(ctx, operands[1]!, end, "'git bisect run'");
  else if (sub === 'submodule') {
    const k = operands.findIndex((p) => argv[p] === 'foreach');
    if (k >= 0) {
      const cmd = operands.slice(k + 1).filter((p) => argv[p] !== '--recursive');
      if (cmd.length > 0) {
        for (const p of cmd) restrict(ctx, p, LITERAL_OR_ONE);
        restrict(ctx, operands[k]!, LITERAL);
        runsCommand(ctx, cmd.map((p) => argv[p]!).join(' '), "'git submodule foreach'", -1);
      }
    }
  }
}

/** `git config [scope] KEY VALUE`, `git config set KEY VALUE`: writes a config file. */
function gitConfig(
  ctx: ArgvContext,
  subAt: number,
  options: readonly ParsedOption[],
  operands: readonly number[],
): void {
  const argv = ctx.argv;
  let words = operands;
  const verb = words[0] === undefined ? undefined : argv[words[0]]!;
  if (
    verb === 'get' ||
    verb === 'list' ||
    verb === 'edit' ||
    verb === 'unset' ||
    verb === 'rename-section' ||
    verb === 'remove-section'
  )
    return;
  if (verb === 'set') words = words.slice(1);
  const readOnly = ctx.argv
    .slice(subAt + 1)
    .some((a) =>
      /^--(?:get|get-all|get-regexp|get-urlmatch|get-color|get-colorbool|list|unset|unset-all|rename-section|remove-section|show-origin|show-scope|name-only)$|^-l$/.test(
        a,
      ),
    );
  if (readOnly || words.length < 2) return;
  const key = argv[words[0]!]!;
  const value = argv[words[1]!]!;
  let file = '.git/config';
  for (const o of options) if (o.option.name === '-f' && o.value !== undefined) file = o.value;
  if (argv.includes('--global')) file = '~/.gitconfig';
  else if (argv.includes('--system')) file = '/etc/gitconfig';
  else if (argv.includes('--worktree')) file = '.git/config.worktree';
  ctx.writeTargets.push({ path: file, via: 'git config', dynamic: file.charCodeAt(0) === 126 });
  const effect = gitConfigEffect(key, value);
  if (effect.kind === 'none') return;
  restrict(ctx, words[0]!, LITERAL);
  restrict(ctx, words[1]!, LITERAL_OR_ONE);
  applyEffect(ctx, effect, `'git config ${key}'`, words[1]!, () => undefined);
}

/**
 * One socat address: `EXEC:cmd` and `SYSTEM:cmd` run a command, `CREATE:f`, `OPEN:f`, `GOPEN:f`
 * and a bare file name write a file; `-`, `STDIO`, sockets and the rest move bytes only.
 */
function socatAddress(ctx: ArgvContext, p: number): void {
  const address = ctx.argv[p]!;
  const colon = address.indexOf(':');
  const type = (colon < 0 ? address : address.slice(0, colon)).toUpperCase();
  const rest = colon < 0 ? '' : address.slice(colon + 1);
  if (type === 'EXEC' || type === 'SYSTEM') {
    restrict(ctx, p, LITERAL);
    // Address options follow a comma (`EXEC:'cmd',pty,stderr`).
    const comma = rest.indexOf(',');
    runsCommand(ctx, comma < 0 ? rest : rest.slice(0, comma), `socat ${type}:`, p);
    return;
  }
  const file =
    type === 'CREATE' || type === 'CREAT' || type === 'OPEN' || type === 'GOPEN' || type === 'PIPE'
      ? rest.split(',')[0]!
      : colon < 0 && address !== '-' && !/^STDIO|^STDIN|^STDOUT|^STDERR/i.test(address)
        ? address.split(',')[0]!
        : undefined;
  if (file !== undefined && file.length > 0) {
    if (isDotfilePath(file)) restrict(ctx, p, LITERAL);
    writes(ctx, file, `socat ${type}:`, p);
  } else if (/,(?:system|exec)=/i.test(address)) {
    restrict(ctx, p, LITERAL);
    opaque(ctx, `a socat address option runs a command ('${address}')`);
  }
}

/**
 * `capsh [--opt=value ...] [-- ARGS | == ARGS]`: `--` runs the shell (`/bin/bash`, or `--shell=`)
 * with ARGS, `==` runs capsh again with ARGS.
 */
function capshInvocation(ctx: ArgvContext, at: number, end: number): void {
  const argv = ctx.argv;
  let shell = 'bash';
  for (let i = at + 1; i < end; i++) {
    const t = argv[i]!;
    if (t === '--' || t === '==') {
      restrict(ctx, i, LITERAL);
      if (t === '==') {
        capshInvocation(ctx, i, end);
        return;
      }
      if (shell === 'bash') shellInvocation(ctx, 'bash', i, end);
      else unseen(ctx, `capsh runs the shell '${shell}', which the matcher cannot read`);
      return;
    }
    restrict(ctx, i, LITERAL);
    if (t.startsWith('--shell=')) shell = t.slice(8);
    else if (!/^--[a-z-]+(?:=.*)?$/s.test(t)) {
      opaque(ctx, `unknown argument '${t}' of 'capsh'`);
      suffixCandidates(ctx, i, end);
      return;
    }
  }
}
