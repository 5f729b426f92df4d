import type { ShellApprovalView, ShellSegmentView } from '@toolgate/contracts';
import { compileProtectedPaths } from './protected-paths';
import { protectedShellWrite } from './protected-writes';
import { analyseShellCommand, type AnalysedSegment } from './shell-analysis';
import {
  compileShellPattern,
  segmentMatchesAny,
  unseenCoveredBy,
  type ShellPattern,
} from './shell-pattern';

/**
 * A parked shell call as an approver should see it: the command split into the segments the chain
 * matched one by one (`a; b && c | d`), each with its argv as the program receives it, and the
 * segment(s) that made the policy ask marked, from the rule recorded with the suspension:
 *
 * - a rule with argv patterns marks the segments a pattern matches (deny and ask patterns are tried
 *   against every program a segment runs, as the chain does); when none matches, the rule asked
 *   because it could not tell, so the segments that cannot be checked are marked, and those that
 *   run code the matcher cannot read (a script, a Makefile, a program it does not know) which a
 *   pattern could match;
 * - a protected path marks the segment that writes it (or, when the path is not literal, the
 *   segments whose write targets are not);
 * - any other rule (the tool, its risk, an expression, a hook, canUseTool, the default) covers the
 *   call as a whole: `scope: 'call'` and no segment is marked.
 *
 * Pure, and total: a command that is not a string or a rule of an unknown shape never throws.
 * Returns null when `command` is not a string.
 */
export function shellApprovalView(command: unknown, rule: unknown): ShellApprovalView | null {
  if (typeof command !== 'string') return null;
  const segments = analyseShellCommand(command);
  const views: ShellSegmentView[] = segments.map((seg) => ({
    argv: seg.words.map((w) => w.text),
    asked: false,
    why: null,
    unmatchable: seg.unmatchable ?? null,
  }));
  const marks = askingSegments(segments, rule);
  if (marks === undefined) return { command, scope: 'call', segments: views };
  for (const [index, why] of marks) views[index] = { ...views[index]!, asked: true, why };
  return { command, scope: 'segments', segments: views };
}

/** Segment index → why it asked; undefined when the rule is not about segments. */
type Marks = Map<number, string>;

function askingSegments(segments: readonly AnalysedSegment[], rule: unknown): Marks | undefined {
  if (typeof rule !== 'object' || rule === null) return undefined;
  const r = rule as Record<string, unknown>;
  if (r.kind === 'protected-path') return protectedPathMarks(segments, r);
  const argv = typeof r.argv === 'string' ? [r.argv] : r.argv;
  if (r.kind === 'rule' && Array.isArray(argv)) return argvMarks(segments, argv);
  return undefined;
}

function argvMarks(segments: readonly AnalysedSegment[], sources: readonly unknown[]): Marks {
  const patterns: ShellPattern[] = [];
  for (const source of sources) {
    if (typeof source !== 'string') continue;
    try {
      patterns.push(compileShellPattern(source));
    } catch {
      // A pattern today's compiler refuses cannot have matched anything worth pointing at.
    }
  }
  const marks: Marks = new Map();
  segments.forEach((seg, i) => {
    const hit = segmentMatchesAny(patterns, seg);
    if (hit !== undefined) marks.set(i, `matches ${hit.source}`);
  });
  if (marks.size > 0) return marks;
  const unchecked = uncheckable(segments);
  segments.forEach((seg, i) => {
    if (unchecked.has(i)) return;
    const covered = unseenCoveredBy(patterns, seg);
    if (covered !== undefined)
      unchecked.set(
        i,
        `runs code the matcher cannot read (${covered.code.reason}), which ${covered.pattern.source} could match`,
      );
  });
  return unchecked;
}

/** The segments the chain could not check: what a rule that asked without matching could not tell. */
function uncheckable(segments: readonly AnalysedSegment[]): Marks {
  const marks: Marks = new Map();
  segments.forEach((seg, i) => {
    if (seg.unmatchable !== undefined) marks.set(i, `cannot be checked: ${seg.unmatchable}`);
  });
  return marks;
}

function protectedPathMarks(
  segments: readonly AnalysedSegment[],
  rule: Record<string, unknown>,
): Marks {
  const marks: Marks = new Map();
  const { path, pattern } = rule;
  if (typeof path === 'string' && typeof pattern === 'string') {
    const protection = compileProtectedPaths([{ paths: [pattern] }]);
    segments.forEach((seg, i) => {
      const hit = protectedShellWrite(protection, [seg]);
      if (hit?.kind === 'match' && hit.match.path === path)
        marks.set(i, `writes ${path}, a protected path (${pattern})`);
    });
    return marks;
  }
  // No literal path: the chain asked because a write target is not one.
  segments.forEach((seg, i) => {
    const dynamic = seg.writeTargets.find((t) => t.dynamic);
    if (dynamic !== undefined)
      marks.set(i, `writes ${dynamic.path} through ${dynamic.via}, which is not a literal path`);
  });
  return marks.size > 0 ? marks : uncheckable(segments);
}
