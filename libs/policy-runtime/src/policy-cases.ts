import { z } from 'zod';
import {
  AgentRefSchema,
  ConfigError,
  DecidedBySchema,
  IsolationSchema,
  RiskSchema,
  TaintSchema,
  ToolNameSchema,
  VerdictSchema,
  canonicalJson,
  toWireError,
  type WhatIfVerdict,
} from '@toolgate/contracts';
import {
  compilePolicyDocument,
  DEFAULT_HOOK_TIMEOUT_MS,
  evaluatePermission,
  type CanUseToolResult,
  type HookResult,
  type LayerClosures,
} from '@toolgate/permissions';
import { validateStoredPolicy, type RemoteLayer } from './stored-policy';

/**
 * Policy tests (`toolgate policy test POLICY --cases CASES.json`): calls and the verdict a policy
 * must give each, checked offline with the pure chain, like `opa test` for Rego. The cases file:
 *
 * ```json
 * { "tools": { "deploy": { "risk": "execute", "needsApproval": true } },
 *   "cases": [
 *     { "name": "no force push", "tool": "shell", "input": { "command": "git push --force" },
 *       "expect": "deny" },
 *     { "tool": "write_file", "input": { "path": ".env" }, "profile": "ci",
 *       "expect": { "verdict": "deny", "decidedBy": "deny-rule", "rule": { "kind": "protected-path" } } },
 *     { "tool": "http_fetch", "input": { "url": "https://x.example" }, "hooks": { "egress": "ask" },
 *       "expect": "ask" } ] }
 * ```
 */

const HookAnswerSchema = z.union([
  z.enum(['allow', 'deny', 'ask', 'pass']),
  z.strictObject({ modifiedInput: z.unknown() }),
]);
export type HookAnswer = z.infer<typeof HookAnswerSchema>;

const ToolFactsSchema = z.strictObject({
  risk: RiskSchema.optional(),
  needsApproval: z.boolean().optional(),
  clearance: TaintSchema.optional(),
});

const ExpectationSchema = z.union([
  VerdictSchema,
  z.strictObject({
    verdict: VerdictSchema,
    decidedBy: DecidedBySchema.optional(),
    /** Fields the decision's rule must have (a subset: other fields may be there too). */
    rule: z.record(z.string(), z.unknown()).optional(),
    /** Text the decision's reason must contain. */
    reason: z.string().optional(),
  }),
]);

export const PolicyTestCaseSchema = z.strictObject({
  name: z.string().max(256).optional(),
  tool: ToolNameSchema,
  input: z.unknown(),
  agent: AgentRefSchema.default({ agentType: 'policy-test' }),
  profile: z.string().min(1).max(128).optional(),
  isolation: IsolationSchema.default('none'),
  taint: TaintSchema.optional(),
  /** Answers of the policy's remote hooks and canUseTool, by their name in `remote`. */
  hooks: z.record(z.string(), HookAnswerSchema).default({}),
  expect: ExpectationSchema,
});
export type PolicyTestCase = z.output<typeof PolicyTestCaseSchema>;

export const PolicyTestCasesSchema = z.strictObject({
  /**
   * What the chain must know of the tools the cases call: risk, needsApproval, clearance (as
   * registered). A tool not listed has no declared risk (`undeclared` to the rules).
   */
  tools: z.record(ToolNameSchema, ToolFactsSchema).default({}),
  cases: z.array(PolicyTestCaseSchema).min(1),
});
export type PolicyTestCases = z.output<typeof PolicyTestCasesSchema>;

/** One case's outcome: what it expected, what the policy decided, and each way they differ. */
export interface PolicyTestResult {
  /** 1-based position in the file. */
  index: number;
  name: string;
  passed: boolean;
  expected: { verdict: string; decidedBy?: string; rule?: unknown; reason?: string };
  actual?: WhatIfVerdict;
  /** Why it failed: one line per difference (empty when it passed). */
  mismatches: string[];
}

export interface PolicyTestRun {
  passed: number;
  failed: number;
  results: PolicyTestResult[];
}

/**
 * Parses a cases file. @throws ConfigError naming every problem (path: message)
 */
export function parsePolicyTestCases(value: unknown): PolicyTestCases {
  const parsed = PolicyTestCasesSchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new ConfigError(`invalid cases: ${issues.join('; ')}`, { details: { issues } });
  }
  return parsed.data;
}

/**
 * Runs every case against `document` (a stored policy, as `PUT /v1/policy` takes it) with the pure
 * chain: nothing is called, remote hooks and canUseTool answer what each case says they answer, and
 * one the case gives no answer for fails that case. @throws ConfigError for a policy a put would
 * refuse
 */
export async function runPolicyTests(
  document: unknown,
  cases: PolicyTestCases,
): Promise<PolicyTestRun> {
  const policy = validateStoredPolicy(document);
  const { remote, approvals: _approvals, errorCap: _errorCap, ...doc } = policy;
  let current: PolicyTestCase | undefined;
  const unanswered: string[] = [];
  const answer = (name: string): HookAnswer | undefined => {
    const given = current!.hooks[name];
    if (given === undefined) unanswered.push(name);
    return given;
  };
  const closures = (layer: RemoteLayer | undefined): LayerClosures => ({
    ...(layer?.hooks
      ? {
          hooks: layer.hooks.map((h) => ({
            name: `remote:${h.name}`,
            timeoutMs: h.timeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS,
            run: (): HookResult => {
              const given = answer(h.name);
              return given === 'pass' || given === undefined ? undefined : given;
            },
          })),
        }
      : {}),
    ...(layer?.canUseTool
      ? {
          canUseTool: (): CanUseToolResult => {
            const given = answer(layer.canUseTool!.name);
            if (given === 'pass' || given === undefined) return undefined;
            // As over the bus: a canUseTool that answers ask is refused, and refused means deny.
            return given === 'ask' ? 'deny' : given;
          },
        }
      : {}),
  });
  const profiles: Record<string, LayerClosures> = {};
  for (const [name, layer] of Object.entries(remote?.profiles ?? {}))
    profiles[name] = closures(layer);
  const compiled = compilePolicyDocument(doc, {
    ...(remote?.engine ? { engine: closures(remote.engine) } : {}),
    profiles,
  });

  const results: PolicyTestResult[] = [];
  for (const [i, c] of cases.cases.entries()) {
    current = c;
    unanswered.length = 0;
    const expected = typeof c.expect === 'string' ? { verdict: c.expect } : c.expect;
    let actual: WhatIfVerdict;
    try {
      const decision = await evaluatePermission(
        compiled.chainFor(c.profile),
        { name: c.tool, ...cases.tools[c.tool] },
        c.input,
        { agent: c.agent, isolation: c.isolation, taint: c.taint, profile: c.profile },
      );
      actual = {
        verdict: decision.verdict,
        decidedBy: decision.decidedBy,
        ...(decision.rule !== undefined ? { rule: decision.rule } : {}),
        ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
      };
    } catch (err) {
      // As the evaluator does with a chain it cannot evaluate (an unknown profile): deny.
      actual = {
        verdict: 'deny',
        decidedBy: 'default',
        reason: `policy could not be evaluated: ${toWireError(err).message}`,
      };
    }
    const mismatches: string[] = [];
    for (const name of new Set(unanswered))
      mismatches.push(`the policy consulted remote hook "${name}" and the case gives no answer`);
    if (actual.verdict !== expected.verdict)
      mismatches.push(`verdict: expected ${expected.verdict}, got ${actual.verdict}`);
    if (expected.decidedBy !== undefined && actual.decidedBy !== expected.decidedBy)
      mismatches.push(`decidedBy: expected ${expected.decidedBy}, got ${actual.decidedBy}`);
    if (expected.rule !== undefined) {
      const rule = (actual.rule ?? {}) as Record<string, unknown>;
      for (const [field, value] of Object.entries(expected.rule)) {
        if (canonicalJson(rule[field] ?? null) !== canonicalJson(value))
          mismatches.push(
            `rule.${field}: expected ${canonicalJson(value)}, got ${rule[field] === undefined ? 'nothing' : canonicalJson(rule[field])}`,
          );
      }
    }
    if (expected.reason !== undefined && !(actual.reason ?? '').includes(expected.reason))
      mismatches.push(
        `reason: expected it to contain ${JSON.stringify(expected.reason)}, got ${JSON.stringify(actual.reason ?? '')}`,
      );
    results.push({
      index: i + 1,
      name: c.name ?? `${c.tool} ${shortInput(c.input)}`,
      passed: mismatches.length === 0,
      expected,
      actual,
      mismatches,
    });
  }
  current = undefined;
  const passed = results.filter((r) => r.passed).length;
  return { passed, failed: results.length - passed, results };
}

function shortInput(input: unknown): string {
  let text: string;
  try {
    text = canonicalJson(input ?? null);
  } catch {
    text = String(input);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
