import { ConfigError, type Risk } from '@toolgate/contracts';
import type { z } from 'zod';
import { compileHostPattern, type HostPattern } from './domain-match';
import { compileExpression, type CompiledExpression } from './expression-rules';
import {
  DEFAULT_APPROVAL_TIMEOUT_MS,
  DEFAULT_HOOK_TIMEOUT_MS,
  EngineLayerSchema,
  ProfileLayerSchema,
  type ExpressionRule,
  type OnTimeout,
  type PermissionRule,
  type RiskClass,
} from './policy-document';
import { compilePermissionPreset } from './preset-compiler';
import {
  compileProtectedPaths,
  type ProtectedPathEffect,
  type ProtectedPaths,
  type ProtectedPathsConfig,
} from './protected-paths';
import { compileShellPattern, type ShellPattern } from './shell-pattern';
import { EMPTY_TAINT_GATE, extendTaintGate, type TaintGate } from './taint-gate';
import {
  SHELL_TOOL_NAME,
  type CanUseTool,
  type LayerClosures,
  type MatchedRule,
  type NamedHook,
  type PermissionConfig,
  type PermissionHook,
  type ProfilePermissions,
} from './permission-types';

/** Bit per risk class, for one-AND risk matching. */
export const RISK_BIT: Readonly<Record<RiskClass, number>> = {
  read: 1,
  write: 2,
  network: 4,
  execute: 8,
  destructive: 16,
  undeclared: 32,
};

/** A compiled table rule. */
export interface TableRuleEntry {
  readonly kind: 'rule';
  readonly description: MatchedRule;
  readonly reason: string;
  readonly tools: ReadonlySet<string> | undefined;
  /** 0: any risk. */
  readonly riskMask: number;
  readonly argv: readonly ShellPattern[] | undefined;
  readonly hosts: readonly HostPattern[] | undefined;
  readonly timeoutMs: number | undefined;
  readonly onTimeout: OnTimeout | undefined;
}

/** A compiled CEL rule. */
export interface ExpressionRuleEntry {
  readonly kind: 'expression';
  readonly description: MatchedRule;
  readonly reason: string;
  readonly expr: CompiledExpression;
  readonly timeoutMs: number | undefined;
  readonly onTimeout: OnTimeout | undefined;
}

export type RuleEntry = TableRuleEntry | ExpressionRuleEntry;

export interface CompiledHook {
  readonly description: MatchedRule;
  readonly name: string;
  readonly timeoutMs: number;
  readonly run: PermissionHook;
}

export interface CompiledCanUseTool {
  readonly description: MatchedRule;
  readonly timeoutMs: number;
  readonly run: CanUseTool;
}

const chainBrand: unique symbol = Symbol('PermissionChain');

/**
 * A compiled, immutable permission chain. Build it with {@link compilePermissionChain}; evaluate
 * calls with `evaluatePermission`. Its fields are an implementation detail except for inspection.
 */
export interface PermissionChain {
  readonly [chainBrand]: true;
  readonly hooks: readonly CompiledHook[];
  readonly deny: readonly RuleEntry[];
  readonly ask: readonly RuleEntry[];
  readonly canUseTool: CompiledCanUseTool | undefined;
  readonly riskOverrides: ReadonlyMap<string, Risk>;
  /** Compiled with readonly isolation (the dispatch's own isolation can also switch it on). */
  readonly readonly: boolean;
  readonly taint: TaintGate;
  readonly approval: { readonly timeoutMs: number; readonly onTimeout: OnTimeout };
  /** Rules with domains, for advisory matching on tools other than the fetch tool. */
  readonly domainRules: readonly {
    readonly layer: 'deny' | 'ask';
    readonly rule: TableRuleEntry;
  }[];
  /** The profile name given at compile time (reported to hooks). */
  readonly profile: string | undefined;
  /** Per tool name and risk, the rules that can match it (filled lazily by the evaluator). */
  readonly ruleViews: RuleViewCache;
  /** The protected paths a write may not reach without an ask (or a deny). */
  readonly protectedPaths: ProtectedPaths;
}

/** The deny and ask rules that can match one tool name with one risk class, in chain order. */
export interface RuleView {
  readonly deny: readonly RuleEntry[];
  readonly ask: readonly RuleEntry[];
  /**
   * Large layers of the shell tool's and the fetch tool's views, indexed by what their argv or
   * domain rules name (see {@link RuleIndex}).
   */
  readonly denyIndex: RuleIndex | undefined;
  readonly askIndex: RuleIndex | undefined;
}

/**
 * A layer's rules (one view's) indexed by what a call must name for them to match: an argv rule
 * only matches a command one of whose argvs starts with the first word of one of its patterns
 * (`git **`, keyed `git`), or its first two when both are words (`git push **`, keyed `git`, NUL,
 * `push`: a command's argv is filed under both), a domain rule only a fetch of a host one of its patterns holds (keyed
 * `=host` for a host, `.suffix` for `*.suffix`). So a command of `git` and `ls` needs only the
 * argv rules naming `git` or `ls`, and a fetch of `a.example` those naming `a.example` or
 * `*.example`; with, always, the rules no key narrows down (wildcard-led patterns, `*`, address
 * ranges, the layer's other rules). Positions are indexes into the view's list, ascending.
 */
export interface RuleIndex {
  readonly always: readonly number[];
  /** Those rules themselves. */
  readonly alwaysRules: readonly RuleEntry[];
  /**
   * Key → the rules it names. Two keys that collide (a program whose name holds a NUL) only add
   * rules to walk, never leave one out.
   */
  readonly byKey: ReadonlyMap<string, readonly number[]>;
}

/** Tool name → rule views indexed by risk-class bit position. Bounded by the evaluator. */
export type RuleViewCache = Map<string, (RuleView | undefined)[]>;

/** Options for {@link compilePermissionChain}. */
export interface CompileChainOptions {
  /**
   * The parent agent's chain. Used only when the profile layer sets `inheritPermissions: true`:
   * the child chain is then the parent's chain (engine layer included) followed by the profile's
   * own layers, and the profile's canUseTool (if any) replaces the parent's. Without the flag the
   * parent is ignored: the child gets the engine layer plus its own profile.
   */
  readonly parent?: PermissionChain;
  /** The profile's name, for rule sources (`profile:<name>`) and hook contexts. */
  readonly profileName?: string;
}

/** Whether `value` is a chain built by {@link compilePermissionChain}. */
export function isPermissionChain(value: unknown): value is PermissionChain {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { [chainBrand]?: unknown })[chainBrand] === true
  );
}

/**
 * Compiles the engine layer and an optional profile layer into one chain (sync). Layers merge
 * engine-first: hooks in registration order, then deny rules, then ask rules; a profile preset's
 * rules are appended after the profile's own in the same layers; the profile's canUseTool wins.
 * @throws ConfigError for any invalid rule, pattern, expression, preset or closure
 */
export function compilePermissionChain(
  engineLayer: PermissionConfig = {},
  profileLayer?: ProfilePermissions,
  options: CompileChainOptions = {},
): PermissionChain {
  const profileSource =
    options.profileName === undefined ? 'profile' : `profile:${options.profileName}`;
  const profile =
    profileLayer === undefined
      ? undefined
      : parseLayer(ProfileLayerSchema, profileLayer, profileSource);
  let builder: Builder;
  if (profile?.json.inheritPermissions === true && options.parent !== undefined) {
    if (!isPermissionChain(options.parent))
      throw new ConfigError('options.parent is not a compiled permission chain');
    builder = fromChain(options.parent);
  } else {
    builder = emptyBuilder();
    const engine = parseLayer(EngineLayerSchema, engineLayer, 'engine');
    addLayer(builder, engine, 'engine');
  }
  if (profile !== undefined) {
    addLayer(builder, profile, profileSource);
    const preset = profile.json.preset;
    if (preset !== undefined) {
      const compiled = compilePermissionPreset(preset);
      const source = `preset:${preset}`;
      compiled.deny.forEach((r, i) => builder.deny.push(compileRule(r, 'deny', source, i)));
      compiled.ask.forEach((r, i) => builder.ask.push(compileRule(r, 'ask', source, i)));
    }
    if (profile.json.isolation === 'readonly') builder.readonly = true;
    if (preset === 'strict') builder.protectedMinimum = 'deny';
  }
  const protectedPaths = compileProtectedPaths(builder.protectedLayers, builder.protectedMinimum);
  const domainRules: { layer: 'deny' | 'ask'; rule: TableRuleEntry }[] = [];
  for (const [layer, entries] of [
    ['deny', builder.deny],
    ['ask', builder.ask],
  ] as const) {
    for (const e of entries)
      if (e.kind === 'rule' && e.hosts !== undefined) domainRules.push({ layer, rule: e });
  }
  return Object.freeze({
    [chainBrand]: true as const,
    hooks: Object.freeze(builder.hooks),
    deny: Object.freeze(builder.deny),
    ask: Object.freeze(builder.ask),
    canUseTool: builder.canUseTool,
    riskOverrides: builder.riskOverrides,
    readonly: builder.readonly,
    taint: builder.taint,
    approval: {
      timeoutMs: builder.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS,
      onTimeout: builder.onTimeout ?? 'deny',
    },
    domainRules,
    profile: options.profileName ?? options.parent?.profile,
    ruleViews: new Map(),
    protectedPaths,
  });
}

/** A JSON-serialisable listing of a chain's layers, for `policy list`-style tooling and audit. */
export function describePermissionChain(chain: PermissionChain): {
  hooks: MatchedRule[];
  deny: MatchedRule[];
  ask: MatchedRule[];
  canUseTool: MatchedRule | undefined;
  riskOverrides: Record<string, Risk>;
  readonly: boolean;
  approval: { timeoutMs: number; onTimeout: OnTimeout };
  protectedPaths: { effect: ProtectedPathEffect; patterns: string[]; except: string[] };
} {
  return {
    hooks: chain.hooks.map((h) => h.description),
    deny: chain.deny.map((r) => r.description),
    ask: chain.ask.map((r) => r.description),
    canUseTool: chain.canUseTool?.description,
    riskOverrides: Object.fromEntries(chain.riskOverrides),
    readonly: chain.readonly,
    approval: { ...chain.approval },
    protectedPaths: {
      effect: chain.protectedPaths.effect,
      patterns: [...chain.protectedPaths.patterns],
      except: [...chain.protectedPaths.except],
    },
  };
}

interface Builder {
  hooks: CompiledHook[];
  deny: RuleEntry[];
  ask: RuleEntry[];
  canUseTool: CompiledCanUseTool | undefined;
  riskOverrides: Map<string, Risk>;
  readonly: boolean;
  taint: TaintGate;
  approvalTimeoutMs: number | undefined;
  onTimeout: OnTimeout | undefined;
  protectedLayers: ProtectedPathsConfig[];
  protectedMinimum: ProtectedPathEffect;
}

function emptyBuilder(): Builder {
  return {
    hooks: [],
    deny: [],
    ask: [],
    canUseTool: undefined,
    riskOverrides: new Map(),
    readonly: false,
    taint: EMPTY_TAINT_GATE,
    approvalTimeoutMs: undefined,
    onTimeout: undefined,
    protectedLayers: [],
    protectedMinimum: 'ask',
  };
}

function fromChain(parent: PermissionChain): Builder {
  return {
    hooks: [...parent.hooks],
    deny: [...parent.deny],
    ask: [...parent.ask],
    canUseTool: parent.canUseTool,
    riskOverrides: new Map(parent.riskOverrides),
    readonly: parent.readonly,
    taint: parent.taint,
    approvalTimeoutMs: parent.approval.timeoutMs,
    onTimeout: parent.approval.onTimeout,
    protectedLayers: [parent.protectedPaths.config],
    protectedMinimum: parent.protectedPaths.effect,
  };
}

interface ParsedLayer<T> {
  readonly json: T;
  readonly closures: LayerClosures;
}

function parseLayer<S extends typeof EngineLayerSchema | typeof ProfileLayerSchema>(
  schema: S,
  layer: PermissionConfig | ProfilePermissions,
  source: string,
): ParsedLayer<z.output<S>> {
  if (typeof layer !== 'object' || layer === null)
    throw new ConfigError(`${source} permissions must be an object`);
  const { hooks, canUseTool, ...json } = layer as PermissionConfig;
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String),
      message: i.message,
    }));
    throw new ConfigError(
      `invalid ${source} permissions: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      { details: { source, issues } },
    );
  }
  if (hooks !== undefined && !Array.isArray(hooks))
    throw new ConfigError(`${source} hooks must be an array`);
  for (const [i, h] of (hooks ?? []).entries()) {
    if (
      typeof h !== 'function' &&
      (typeof h !== 'object' || h === null || typeof (h as NamedHook).run !== 'function')
    ) {
      throw new ConfigError(`${source} hook #${i} is neither a function nor { run }`);
    }
  }
  if (canUseTool !== undefined && typeof canUseTool !== 'function')
    throw new ConfigError(`${source} canUseTool must be a function`);
  return { json: parsed.data as z.output<S>, closures: { hooks, canUseTool } };
}

function addLayer(
  builder: Builder,
  layer: ParsedLayer<z.output<typeof EngineLayerSchema>>,
  source: string,
): void {
  const json = layer.json;
  const hookTimeoutMs = json.hookTimeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS;
  (layer.closures.hooks ?? []).forEach((h, index) => {
    const spec: NamedHook = typeof h === 'function' ? { run: h } : h;
    const name = spec.name ?? (typeof h === 'function' && h.name ? h.name : `${source}#${index}`);
    const timeoutMs = spec.timeoutMs ?? hookTimeoutMs;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
      throw new ConfigError(`hook ${name}: timeoutMs must be positive`);
    builder.hooks.push({
      description: { source, kind: 'hook', index, name },
      name,
      timeoutMs,
      run: spec.run,
    });
  });
  if (layer.closures.canUseTool !== undefined) {
    builder.canUseTool = {
      description: { source, kind: 'canUseTool' },
      timeoutMs: hookTimeoutMs,
      run: layer.closures.canUseTool,
    };
  }
  (json.deny ?? []).forEach((r, i) => builder.deny.push(compileRule(r, 'deny', source, i)));
  (json.ask ?? []).forEach((r, i) => builder.ask.push(compileRule(r, 'ask', source, i)));
  (json.expressions ?? []).forEach((r, i) => {
    const entry = compileExpressionRule(r, source, i);
    (r.effect === 'deny' ? builder.deny : builder.ask).push(entry);
  });
  for (const [tool, risk] of Object.entries(json.riskOverrides ?? {}))
    builder.riskOverrides.set(tool, risk);
  builder.taint = extendTaintGate(builder.taint, json.taint, source);
  if (json.protectedPaths !== undefined) builder.protectedLayers.push(json.protectedPaths);
  if (json.approvalTimeoutMs !== undefined) builder.approvalTimeoutMs = json.approvalTimeoutMs;
  if (json.onTimeout !== undefined) builder.onTimeout = json.onTimeout;
}

const toArray = <T>(v: T | readonly T[] | undefined): readonly T[] | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? (v as readonly T[]) : [v as T];

function compileRule(
  rule: PermissionRule,
  layer: 'deny' | 'ask',
  source: string,
  index: number,
): TableRuleEntry {
  const what = `${source} ${layer} rule ${rule.id ?? `#${index}`}`;
  const tools = toArray(rule.tool);
  const risks = toArray(rule.risk);
  const argv = toArray(rule.argv);
  if (
    tools === undefined &&
    risks === undefined &&
    argv === undefined &&
    rule.domains === undefined
  ) {
    throw new ConfigError(`${what}: a rule needs at least one of tool, risk, argv, domains`);
  }
  if (argv !== undefined && tools !== undefined && !tools.includes(SHELL_TOOL_NAME)) {
    throw new ConfigError(`${what}: argv patterns apply to the '${SHELL_TOOL_NAME}' tool only`);
  }
  let riskMask = 0;
  for (const r of risks ?? []) {
    const bit = RISK_BIT[r];
    if (bit === undefined)
      throw new ConfigError(`${what}: unknown risk class ${JSON.stringify(r)}`);
    riskMask |= bit;
  }
  const patterns = argv?.map((p) => {
    try {
      return compileShellPattern(p);
    } catch (err) {
      throw new ConfigError(`${what}: ${(err as Error).message}`, {
        cause: err,
        details: { pattern: p },
      });
    }
  });
  const hosts = rule.domains?.map((d) => compileHostPattern(d));
  const description: MatchedRule = { source, kind: 'rule', layer, index, ...rule };
  return {
    kind: 'rule',
    description,
    reason: rule.reason ?? describeRule(layer, source, tools, risks, argv, rule.domains),
    tools:
      tools === undefined
        ? undefined
        : new Set(argv !== undefined ? tools.filter((t) => t === SHELL_TOOL_NAME) : tools),
    riskMask,
    argv: patterns,
    hosts,
    timeoutMs: rule.approvalTimeoutMs,
    onTimeout: rule.onTimeout,
  };
}

function compileExpressionRule(
  rule: ExpressionRule,
  source: string,
  index: number,
): ExpressionRuleEntry {
  const what = `${source} expression rule ${rule.id ?? `#${index}`}`;
  return {
    kind: 'expression',
    description: { source, kind: 'expression', layer: rule.effect, index, ...rule },
    reason:
      rule.reason ??
      `${what} (${rule.when}) ${rule.effect === 'deny' ? 'denies' : 'asks before'} this call`,
    expr: compileExpression(rule.when, what),
    timeoutMs: rule.approvalTimeoutMs,
    onTimeout: rule.onTimeout,
  };
}

function describeRule(
  layer: 'deny' | 'ask',
  source: string,
  tools: readonly string[] | undefined,
  risks: readonly string[] | undefined,
  argv: readonly string[] | undefined,
  domains: readonly string[] | undefined,
): string {
  const parts: string[] = [];
  if (tools) parts.push(`tool ${tools.join(' | ')}`);
  if (risks) parts.push(`risk ${risks.join(' | ')}`);
  if (argv) parts.push(`command ${argv.map((a) => `'${a}'`).join(' | ')}`);
  if (domains) parts.push(`host ${domains.join(' | ')}`);
  const verb = layer === 'deny' ? 'denies' : 'asks before';
  return `the ${source} policy ${verb} calls matching ${parts.join(', ')}`;
}
