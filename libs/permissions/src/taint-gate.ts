import type { Taint } from '@toolgate/contracts';
import {
  compileExpression,
  type CompiledExpression,
  type ExpressionContext,
  type ExpressionFacts,
} from './expression-rules';
import { compileHostPattern, matchHost, type HostPattern } from './domain-match';
import type { TaintPolicy } from './policy-document';
import type { MatchedRule, PermissionDiagnostic } from './permission-types';

/** Taint levels in order: public < internal < private. */
export const TAINT_RANK: Readonly<Record<Taint, number>> = { public: 0, internal: 1, private: 2 };

interface CompiledAllowEntry {
  readonly tool: string;
  readonly target: string | undefined;
  readonly host: HostPattern | undefined;
  readonly rank: number;
}

interface CompiledException {
  readonly description: MatchedRule;
  readonly expr: CompiledExpression;
}

/** The compiled taint gate (immutable; layers merge by concatenation). */
export interface TaintGate {
  readonly egressTools: ReadonlySet<string>;
  readonly allowlist: readonly CompiledAllowEntry[];
  readonly exceptions: readonly CompiledException[];
}

export const EMPTY_TAINT_GATE: TaintGate = {
  egressTools: new Set(),
  allowlist: [],
  exceptions: [],
};

/** Adds a layer's taint policy to a gate. @throws ConfigError on a bad expression or host pattern */
export function extendTaintGate(
  gate: TaintGate,
  policy: TaintPolicy | undefined,
  source: string,
): TaintGate {
  if (policy === undefined) return gate;
  const egressTools = new Set(gate.egressTools);
  for (const t of policy.egressTools ?? []) egressTools.add(t);
  const allowlist = [...gate.allowlist];
  for (const e of policy.allowlist ?? []) {
    const host =
      e.target !== undefined && e.target.startsWith('*') ? compileHostPattern(e.target) : undefined;
    allowlist.push({ tool: e.tool, target: e.target, host, rank: TAINT_RANK[e.taint] });
  }
  const exceptions = [...gate.exceptions];
  (policy.exceptions ?? []).forEach((x, index) => {
    const description: MatchedRule = { source, kind: 'taint-exception', index, ...x };
    exceptions.push({
      description,
      expr: compileExpression(x.when, `${source} taint exception ${x.id ?? index}`),
    });
  });
  return { egressTools, allowlist, exceptions };
}

/** Facts the gate decides on. */
export interface TaintQuery {
  readonly tool: string;
  readonly isEgress: boolean;
  readonly taint: Taint | undefined;
  readonly clearance: Taint | undefined;
  readonly target: string | undefined;
  readonly fetchHost: string | undefined;
  facts(): ExpressionFacts;
  expressionContext(): ExpressionContext;
}

/**
 * Whether the gate closes: an egress tool cleared below the dispatch's taint, with no static
 * allowlist entry and no exception expression letting it through. Exception errors keep the gate
 * closed and are reported.
 */
export function taintGateCloses(
  gate: TaintGate,
  q: TaintQuery,
  diagnostics: PermissionDiagnostic[],
): boolean {
  if (q.taint === undefined || !q.isEgress) return false;
  const taintRank = TAINT_RANK[q.taint];
  if (TAINT_RANK[q.clearance ?? 'public'] >= taintRank) return false;
  for (const e of gate.allowlist) {
    if (e.tool !== q.tool || taintRank > e.rank) continue;
    if (e.target === undefined) return false;
    if (e.host !== undefined) {
      if (q.fetchHost !== undefined && matchHost([e.host], q.fetchHost)) return false;
    } else if (e.target === q.target) {
      return false;
    }
  }
  for (const x of gate.exceptions) {
    const r = x.expr.evaluate(q.facts(), q);
    if (r.error !== undefined)
      diagnostics.push({ kind: 'taint-exception-error', rule: x.description, message: r.error });
    else if (r.value) return false;
  }
  return true;
}
