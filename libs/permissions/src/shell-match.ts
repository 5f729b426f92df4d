import { ConfigError } from '@toolgate/contracts';
import { analyseShellCommand, type AnalysedSegment } from './shell-analysis';
import {
  compileShellPattern,
  matchesStrictly,
  segmentMatchesAny,
  unseenCoveredBy,
  type ShellPattern,
} from './shell-pattern';

/** The three pattern tables of {@link matchShellCommand}. */
export interface ShellPatternTables {
  readonly allow?: readonly string[];
  readonly ask?: readonly string[];
  readonly deny?: readonly string[];
}

export type ShellVerdict = 'allow' | 'ask' | 'deny';

/** How one segment was decided. */
export interface ShellSegmentDecision {
  /** The segment's words as lexed (after quote removal). */
  readonly argv: readonly string[];
  readonly verdict: ShellVerdict;
  /** The pattern that decided it, if one did. */
  readonly pattern?: string;
  /** Why: the matched table, or why the segment is unmatchable. */
  readonly reason: string;
}

/** The verdict with a per-segment account, for dry runs and CLIs. */
export interface ShellDecision {
  readonly verdict: ShellVerdict;
  readonly segments: readonly ShellSegmentDecision[];
}

/** A compiled set of tables; calling it matches a command. */
export interface ShellMatcher {
  (command: string): ShellVerdict;
  explain(command: string): ShellDecision;
}

const RANK: Record<ShellVerdict, number> = { allow: 0, ask: 1, deny: 2 };

/**
 * Compiles the tables once for repeated matching.
 * @throws ConfigError on an invalid pattern
 */
export function compileShellMatcher(tables: ShellPatternTables): ShellMatcher {
  const compiled = compileTables(tables);
  const match = (command: string): ShellVerdict => decide(command, compiled);
  return Object.assign(match, { explain: (command: string) => explain(command, compiled) });
}

/** The three tables, compiled. */
interface CompiledTables {
  readonly allow: readonly ShellPattern[];
  readonly ask: readonly ShellPattern[];
  readonly deny: readonly ShellPattern[];
}

function compileTables(tables: ShellPatternTables): CompiledTables {
  return {
    allow: compileList(tables.allow, 'allow'),
    ask: compileList(tables.ask, 'ask'),
    deny: compileList(tables.deny, 'deny'),
  };
}

const cache = new Map<string, ShellPattern>();
const CACHE_LIMIT = 4_096;

function cachedPattern(source: string): ShellPattern {
  let p = cache.get(source);
  if (p === undefined) {
    p = compileShellPattern(source);
    if (cache.size >= CACHE_LIMIT) cache.clear();
    cache.set(source, p);
  }
  return p;
}

function compileList(list: readonly string[] | undefined, table: string): ShellPattern[] {
  if (list === undefined) return [];
  if (!Array.isArray(list))
    throw new ConfigError(`shell ${table} patterns must be an array of strings`);
  return list.map(cachedPattern);
}

/**
 * Matches a shell command against allow/ask/deny pattern tables (sync). Each segment is denied if
 * a deny pattern matches it (or a program it runs), else asks if it is unmatchable or an ask
 * pattern matches it, else is allowed if an allow pattern matches its whole argv, else asks.
 * The verdict is the strictest across segments. Patterns are compiled once and cached.
 * @throws ConfigError on an invalid pattern
 */
export function matchShellCommand(command: string, tables: ShellPatternTables): ShellVerdict {
  return decide(command, compileTables(tables));
}

/** Like {@link matchShellCommand}, with a per-segment account of the decision. */
export function explainShellCommand(command: string, tables: ShellPatternTables): ShellDecision {
  return explain(command, compileTables(tables));
}

function decide(command: string, tables: CompiledTables): ShellVerdict {
  if (typeof command !== 'string') return 'ask';
  const segments = analyseShellCommand(command);
  if (segments.length === 0) return 'ask';
  let verdict: ShellVerdict = 'allow';
  for (let s = 0; s < segments.length; s++) {
    const v = decideSegment(segments[s]!, tables).verdict;
    if (v === 'deny') return 'deny';
    if (v === 'ask') verdict = 'ask';
  }
  return verdict;
}

function explain(command: string, tables: CompiledTables): ShellDecision {
  if (typeof command !== 'string') {
    return {
      verdict: 'ask',
      segments: [{ argv: [], verdict: 'ask', reason: 'the command is not a string' }],
    };
  }
  const segments = analyseShellCommand(command).map((seg): ShellSegmentDecision => ({
    argv: seg.words.map((w) => w.text),
    ...decideSegment(seg, tables),
  }));
  if (segments.length === 0) {
    return {
      verdict: 'ask',
      segments: [{ argv: [], verdict: 'ask', reason: 'the command is empty' }],
    };
  }
  let verdict: ShellVerdict = 'allow';
  for (const s of segments) if (RANK[s.verdict] > RANK[verdict]) verdict = s.verdict;
  return { verdict, segments };
}

/** How one segment is decided, without its argv (which only {@link explain} reports). */
function decideSegment(
  segment: AnalysedSegment,
  { allow, ask, deny }: CompiledTables,
): Omit<ShellSegmentDecision, 'argv'> {
  const denied = segmentMatchesAny(deny, segment);
  if (denied !== undefined)
    return { verdict: 'deny', pattern: denied.source, reason: 'matches a deny pattern' };
  if (segment.unmatchable !== undefined) {
    return { verdict: 'ask', reason: `unmatchable: ${segment.unmatchable}` };
  }
  // Code the segment runs unseen (a script, a Makefile, a program the table does not know) may do
  // what a deny or ask pattern names: ask (an allow-only table still decides below).
  const unseenDeny = unseenCoveredBy(deny, segment);
  if (unseenDeny !== undefined) {
    return {
      verdict: 'ask',
      pattern: unseenDeny.pattern.source,
      reason: `${unseenDeny.code.reason}, and it could run what a deny pattern matches`,
    };
  }
  const asked = segmentMatchesAny(ask, segment);
  if (asked !== undefined)
    return { verdict: 'ask', pattern: asked.source, reason: 'matches an ask pattern' };
  const unseenAsk = unseenCoveredBy(ask, segment);
  if (unseenAsk !== undefined) {
    return {
      verdict: 'ask',
      pattern: unseenAsk.pattern.source,
      reason: `${unseenAsk.code.reason}, and it could run what an ask pattern matches`,
    };
  }
  for (let p = 0; p < allow.length; p++) {
    const pattern = allow[p]!;
    if (matchesStrictly(pattern, segment)) {
      return { verdict: 'allow', pattern: pattern.source, reason: 'matches an allow pattern' };
    }
  }
  return { verdict: 'ask', reason: 'matches no allow pattern' };
}
