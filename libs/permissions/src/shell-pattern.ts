import { ConfigError } from '@toolgate/contracts';
import {
  MATCH_LITERAL,
  MATCH_ONE,
  MATCH_REST,
  type AnalysedSegment,
  type UnseenCode,
} from './shell-analysis';
import { lexShell } from './shell-lexer';

// Local copies: the matcher reads them once per word, and an imported binding is a property read.
const LITERAL = MATCH_LITERAL;
const ONE = MATCH_ONE;
const REST = MATCH_REST;

/** One token of a compiled pattern: a literal word, a redirection operator, or `*`. */
export type PatternToken =
  | { readonly kind: 'literal'; readonly text: string; readonly redirect: boolean }
  | { readonly kind: 'one' };

/** A compiled shell pattern: a token sequence, optionally ending in `**`. */
export interface ShellPattern {
  readonly source: string;
  readonly tokens: readonly PatternToken[];
  /** Whether the pattern ends in `**` (all remaining tokens, zero or more). */
  readonly rest: boolean;
}

/**
 * Compiles a pattern such as `npm run *` or `rm **`. The pattern is lexed like a command (so quotes
 * work: `echo '*'` matches a literal `*`). A literal matches one identical token, `*` exactly one
 * token, `**` all remaining tokens and only last.
 * @throws ConfigError on an empty pattern, `**` not last, a partial wildcard (`*.ts`), an expansion
 *   or anything the lexer cannot pin down
 */
export function compileShellPattern(source: string): ShellPattern {
  const fail = (why: string): never => {
    throw new ConfigError(`invalid shell pattern ${JSON.stringify(source)}: ${why}`, {
      details: { pattern: source },
    });
  };
  if (typeof source !== 'string') fail('a pattern is a string');
  const segments = lexShell(source);
  if (segments.length !== 1)
    fail(
      segments.length === 0
        ? 'the pattern is empty'
        : 'a pattern is one simple command, without separators',
    );
  const seg = segments[0]!;
  if (seg.unmatchable !== undefined) fail(seg.unmatchable);
  const tokens: PatternToken[] = [];
  let rest = false;
  for (let k = 0; k < seg.words.length; k++) {
    const w = seg.words[k]!;
    if (rest) fail("'**' may only appear last");
    if (w.dynamic) fail('patterns cannot contain expansions');
    if (w.glob) {
      if (w.text === '*') tokens.push({ kind: 'one' });
      else if (w.text === '**') rest = true;
      else
        fail(
          `'${w.text}': wildcards are whole tokens ('*' or '**'); quote the token to match it literally`,
        );
    } else {
      tokens.push({ kind: 'literal', text: w.text, redirect: w.redirect });
    }
  }
  if (tokens.length === 0 && !rest) fail('the pattern is empty');
  return { source, tokens, rest };
}

/**
 * Strict matching for allow patterns: literals need a literal, unexpanded word; wildcards never
 * stand for the program, assignments, redirection operators, dotfile targets or inline-code
 * options; `*` never stands for an expansion or glob that could become several words.
 */
export function matchesStrictly(pattern: ShellPattern, segment: AnalysedSegment): boolean {
  const words = segment.words;
  const mask = segment.allowMask;
  const tokens = pattern.tokens;
  const fixed = tokens.length;
  if (pattern.rest ? words.length < fixed : words.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    const t = tokens[i]!;
    const m = mask[i]!;
    if (t.kind === 'one') {
      if ((m & ONE) === 0) return false;
    } else {
      const w = words[i]!;
      if ((m & LITERAL) === 0 || w.text !== t.text || w.redirect !== t.redirect) return false;
    }
  }
  for (let i = fixed; i < words.length; i++) {
    if ((mask[i]! & REST) === 0) return false;
  }
  return true;
}

/** Loose matching for deny and ask patterns: over-matching there only ever makes a verdict stricter. */
export function matchesLoosely(pattern: ShellPattern, argv: readonly string[]): boolean {
  const tokens = pattern.tokens;
  const fixed = tokens.length;
  if (pattern.rest ? argv.length < fixed : argv.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    const t = tokens[i]!;
    if (t.kind === 'literal' && t.text !== argv[i]) return false;
  }
  return true;
}

/** Whether any candidate of `segment` matches any of `patterns` loosely. */
export function segmentMatchesAny(
  patterns: readonly ShellPattern[],
  segment: AnalysedSegment,
): ShellPattern | undefined {
  const candidates = segment.candidates;
  for (let p = 0; p < patterns.length; p++) {
    const pattern = patterns[p]!;
    for (let c = 0; c < candidates.length; c++) {
      if (matchesLoosely(pattern, candidates[c]!)) return pattern;
    }
  }
  return undefined;
}

/** Whether `pattern`'s tokens from `t0` match `argv` from `a0` loosely (see {@link matchesLoosely}). */
function matchesLooselyFrom(
  pattern: ShellPattern,
  t0: number,
  argv: readonly string[],
  a0: number,
): boolean {
  const tokens = pattern.tokens;
  const fixed = tokens.length - t0;
  const length = argv.length - a0;
  if (pattern.rest ? length < fixed : length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    const t = tokens[t0 + i]!;
    if (t.kind === 'literal' && t.text !== argv[a0 + i]) return false;
  }
  return true;
}

/**
 * Whether a deny or ask pattern could match code the matcher cannot see: anything, for a script
 * or a program named by a path; for a program the table does not know (its `argv`), a pattern
 * whose arguments match its arguments (it may be a renamed copy of the pattern's program) or that
 * matches a suffix of its arguments (it may be a wrapper).
 */
export function mayCoverUnseen(pattern: ShellPattern, code: UnseenCode): boolean {
  const argv = code.argv;
  if (argv === undefined) return true;
  if (pattern.tokens.length === 0 || matchesLooselyFrom(pattern, 1, argv, 1)) return true;
  for (let j = 1; j < argv.length; j++) {
    if (argv[j]!.charCodeAt(0) !== 45 && matchesLooselyFrom(pattern, 0, argv, j)) return true;
  }
  return false;
}

/** The first pattern that could match code `segment` runs unseen, with that code. */
export function unseenCoveredBy(
  patterns: readonly ShellPattern[],
  segment: AnalysedSegment,
): { pattern: ShellPattern; code: UnseenCode } | undefined {
  const unseen = segment.unseen;
  if (unseen.length === 0) return undefined;
  for (let p = 0; p < patterns.length; p++) {
    const pattern = patterns[p]!;
    for (let u = 0; u < unseen.length; u++) {
      if (mayCoverUnseen(pattern, unseen[u]!)) return { pattern, code: unseen[u]! };
    }
  }
  return undefined;
}
