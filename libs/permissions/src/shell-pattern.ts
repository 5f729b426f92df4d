import { ConfigError } from '@toolgate/contracts';
import { MATCH_LITERAL, MATCH_ONE, MATCH_REST, type AnalysedSegment } from './shell-analysis';
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
