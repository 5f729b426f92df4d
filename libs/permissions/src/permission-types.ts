import type { AgentRef, DecidedBy, Isolation, Risk, Taint, Verdict } from '@toolgate/contracts';
import type { EngineLayer, OnTimeout, ProfileLayer, RiskClass } from './policy-document';

/** The shell tool's name: argv rules apply to it, its input is `{ command: string }`. */
export const SHELL_TOOL_NAME = 'shell';
/** The first-party fetch tool's name: domain rules are enforced for it, its input is `{ url, ... }`. */
export const FETCH_TOOL_NAME = 'http_fetch';

/** What the chain needs to know about a tool (a `ToolRef` from the contracts fits). */
export interface PermissionTool {
  readonly name: string;
  readonly risk?: Risk | undefined;
  readonly needsApproval?: boolean | undefined;
  /** Taint clearance for egress (public < internal < private); `'public'` when absent. */
  readonly clearance?: Taint | undefined;
}

/** Facts about the dispatch that rules, expressions, hooks and the taint gate may use. */
export interface EvaluationContext {
  readonly agent?: AgentRef | undefined;
  /** The taint level of the data in the call; no taint gate applies when absent. */
  readonly taint?: Taint | undefined;
  /** `'readonly'` adds the readonly isolation deny rule for this dispatch. */
  readonly isolation?: Isolation | undefined;
  /** Where the call sends data (recipient, bucket, ...); the fetch tool's target is its URL host. */
  readonly target?: string | undefined;
  /** The profile the chain was compiled for (carried to hooks for their own decisions). */
  readonly profile?: string | undefined;
}

/** What hooks and canUseTool receive besides the tool name and input. */
export interface HookContext {
  readonly agent: AgentRef | undefined;
  readonly taint: Taint | undefined;
  readonly isolation: Isolation | undefined;
  readonly target: string | undefined;
  readonly profile: string | undefined;
  /** The tool with its effective risk (after risk overrides). */
  readonly tool: {
    readonly name: string;
    readonly risk: Risk | undefined;
    readonly needsApproval: boolean;
    readonly clearance: Taint | undefined;
  };
}

/** Substitutes the input and continues the chain. */
export interface ModifiedInput {
  readonly modifiedInput: unknown;
}

/** A verdict with the hook's own reason (shown in the settled message or to the approver). */
export interface ReasonedVerdict {
  readonly verdict: Verdict;
  readonly reason: string;
}

export type HookResult = Verdict | ReasonedVerdict | ModifiedInput | undefined | void;

/**
 * A hook: decisive with 'allow' | 'deny' | 'ask', substitutes with `{ modifiedInput }`, passes with
 * undefined. Sync or async; throwing or missing its deadline denies.
 */
export type PermissionHook = (
  toolName: string,
  input: unknown,
  ctx: HookContext,
) => HookResult | PromiseLike<HookResult>;

/** A hook with a name (for audit) and its own deadline. */
export interface NamedHook {
  readonly name?: string;
  readonly timeoutMs?: number;
  readonly run: PermissionHook;
}

export type CanUseToolResult =
  | 'allow'
  | 'deny'
  | (ReasonedVerdict & { readonly verdict: 'allow' | 'deny' })
  | ModifiedInput
  | undefined
  | void;

/**
 * The single programmatic override: 'allow' (decisive, even for needsApproval tools), 'deny', or
 * `{ modifiedInput }`. Throwing or missing the deadline denies.
 */
export type CanUseTool = (
  toolName: string,
  input: unknown,
  ctx: HookContext,
) => CanUseToolResult | PromiseLike<CanUseToolResult>;

/** Closures a layer may carry besides its serialisable part. */
export interface LayerClosures {
  readonly hooks?: readonly (PermissionHook | NamedHook)[];
  readonly canUseTool?: CanUseTool;
}

/** The engine layer: serialisable rules plus optional closures. */
export type PermissionConfig = EngineLayer & LayerClosures;

/** A profile layer: serialisable rules, preset, inheritPermissions, plus optional closures. */
export type ProfilePermissions = ProfileLayer & LayerClosures;

/**
 * A JSON-serialisable description of what decided: `source` is `engine`, `profile[:name]`,
 * `preset:<name>`, `isolation:readonly`, `taint-gate`, `hook`, `canUseTool` or `default`; `kind` is
 * `rule`, `expression`, `isolation`, `taint-gate`, `hook`, `canUseTool` or `default`. Rules carry
 * their own fields (`tool`, `risk`, `argv`, `domains`, `when`, ...).
 */
export interface MatchedRule {
  readonly source: string;
  readonly kind: string;
  readonly [field: string]: unknown;
}

/** A domain rule that matched a tool it cannot be enforced for: reported, never decisive. */
export interface AdvisoryMatch {
  readonly layer: 'deny' | 'ask';
  readonly host: string;
  readonly rule: MatchedRule;
}

/** Something that went wrong during evaluation and was turned into a stricter verdict. */
export interface PermissionDiagnostic {
  readonly kind: 'expression-error' | 'taint-exception-error';
  readonly rule: MatchedRule;
  readonly message: string;
}

/** How an ask is parked: the approval window and what happens when it passes. */
export interface ApprovalSettings {
  readonly timeoutMs: number;
  readonly onTimeout: OnTimeout;
}

/** The chain's decision: everything a `decided`/`suspended` event and the audit log need. */
export interface PermissionDecision {
  readonly verdict: Verdict;
  readonly decidedBy: DecidedBy;
  /** What decided, when a rule, hook or canUseTool did. */
  readonly rule?: MatchedRule;
  /** Human-readable policy reason (what the model sees on deny; what an approver sees on ask). */
  readonly reason?: string;
  /** The post-hook input: exactly what `execute` would receive. */
  readonly input: unknown;
  /** Advisory domain-rule matches (tools other than the fetch tool). */
  readonly advisory: readonly AdvisoryMatch[];
  /** The effective risk class the rules saw (after overrides). */
  readonly risk: RiskClass;
  /** For ask: the approval window and its timeout decision. */
  readonly approval?: ApprovalSettings;
  /** Expression errors and other reported problems. */
  readonly diagnostics: readonly PermissionDiagnostic[];
}
