import type { DecidedBy, Risk, Verdict } from '@toolgate/contracts';
import { fetchTargetHost, hostsMentioned, matchHost } from './domain-match';
import { toCelValue, type ExpressionContext, type ExpressionFacts } from './expression-rules';
import {
  isPermissionChain,
  RISK_BIT,
  type PermissionChain,
  type RuleIndex,
  type RuleEntry,
  type RuleView,
  type TableRuleEntry,
} from './permission-chain';
import { RiskClassSchema, type OnTimeout, type RiskClass } from './policy-document';
import { analyseShellCommand, type AnalysedSegment } from './shell-analysis';
import { segmentMatchesAny, unseenCoveredBy } from './shell-pattern';
import { protectedFieldWrite, protectedShellWrite, type ProtectedWrite } from './protected-writes';
import { taintGateCloses } from './taint-gate';
import { settleDeadline, startDeadline } from './hook-deadline';
import {
  FETCH_TOOL_NAME,
  SHELL_TOOL_NAME,
  type AdvisoryMatch,
  type EvaluationContext,
  type HookContext,
  type MatchedRule,
  type ReasonedVerdict,
  type PermissionDecision,
  type PermissionDiagnostic,
  type PermissionTool,
} from './permission-types';

const NO = 0;
const MATCH = 1;
/** The rule may match but the call cannot be analysed far enough to tell: never weaker than ask. */
const UNKNOWN = 2;
type Match = typeof NO | typeof MATCH | typeof UNKNOWN;

const READONLY_MASK = RISK_BIT.write | RISK_BIT.destructive;
const READONLY_RULE: MatchedRule = Object.freeze({
  source: 'isolation:readonly',
  kind: 'isolation',
  layer: 'deny',
  risk: ['write', 'destructive'],
});
const NO_ADVISORY: readonly AdvisoryMatch[] = Object.freeze([]);
const NO_DIAGNOSTICS: readonly PermissionDiagnostic[] = Object.freeze([]);
const EMPTY_CONTEXT: EvaluationContext = Object.freeze({});

/** Per-call state: lazily computed views of the (post-hook) input. */
class CallState {
  shell: AnalysedSegment[] | undefined = undefined;
  fetchHostDone = false;
  fetchHost: string | undefined = undefined;
  cel: ExpressionContext | undefined = undefined;
  celFacts: ExpressionFacts | undefined = undefined;
  diagnostics: PermissionDiagnostic[] | undefined = undefined;
  protectedDone = false;
  protectedHit: ProtectedWrite = undefined;

  constructor(
    readonly toolName: string,
    readonly riskClass: RiskClass,
    readonly riskBit: number,
    public input: unknown,
    readonly context: EvaluationContext,
  ) {}

  shellSegments(): AnalysedSegment[] | undefined {
    if (this.shell === undefined) {
      const command =
        typeof this.input === 'object' && this.input !== null
          ? (this.input as { command?: unknown }).command
          : undefined;
      if (typeof command !== 'string') return undefined;
      this.shell = analyseShellCommand(command);
    }
    return this.shell;
  }

  host(): string | undefined {
    if (!this.fetchHostDone) {
      this.fetchHost = this.toolName === FETCH_TOOL_NAME ? fetchTargetHost(this.input) : undefined;
      this.fetchHostDone = true;
    }
    return this.fetchHost;
  }

  target(): string | undefined {
    if (this.toolName === FETCH_TOOL_NAME) return this.host();
    if (this.context.target !== undefined) return this.context.target;
    const t =
      typeof this.input === 'object' && this.input !== null
        ? (this.input as { target?: unknown }).target
        : undefined;
    return typeof t === 'string' ? t : undefined;
  }

  facts(): ExpressionFacts {
    return (this.celFacts ??= {
      tool: this.toolName,
      risk: this.riskClass,
      taint: this.context.taint ?? 'public',
      target: this.target() ?? '',
    });
  }

  expressionContext(): ExpressionContext {
    if (this.cel === undefined) {
      const agent = this.context.agent;
      const facts = this.facts();
      this.cel = {
        tool: facts.tool,
        risk: facts.risk,
        input: toCelValue(this.input),
        agent: { agentType: agent?.agentType ?? '', label: agent?.label ?? '' },
        taint: facts.taint,
        target: facts.target,
      };
    }
    return this.cel;
  }

  /** The protected path this call writes (or may write), computed once per input. */
  protectedWrite(chain: PermissionChain): ProtectedWrite {
    if (!this.protectedDone) {
      const protection = chain.protectedPaths;
      if (this.toolName === SHELL_TOOL_NAME) {
        const segments = this.shellSegments();
        this.protectedHit =
          segments === undefined ? undefined : protectedShellWrite(protection, segments);
      } else {
        this.protectedHit = protectedFieldWrite(protection, this.toolName, this.input);
      }
      this.protectedDone = true;
    }
    return this.protectedHit;
  }

  report(d: PermissionDiagnostic): void {
    (this.diagnostics ??= []).push(d);
  }

  /** Forgets views of the input after a hook or canUseTool substituted it. */
  substitute(input: unknown): void {
    this.input = input;
    this.shell = undefined;
    this.fetchHostDone = false;
    this.cel = undefined;
    this.celFacts = undefined;
    this.protectedDone = false;
    this.protectedHit = undefined;
  }
}

/** Evaluation is waiting on canUseTool rather than on a hook. */
const CAN_USE_TOOL = -1;

/**
 * One evaluation in flight. The chain runs synchronously until a hook or canUseTool returns a
 * promise; only then does the call pay for a promise of its own (see {@link evaluatePermission}).
 */
class Evaluation {
  hookContext: HookContext | undefined = undefined;
  /** The hook awaited (its index), or {@link CAN_USE_TOOL}. */
  waitingOn = 0;
  pending: PromiseLike<unknown> | undefined = undefined;
  resolve: ((d: PermissionDecision) => void) | undefined = undefined;
  reject: ((err: unknown) => void) | undefined = undefined;

  constructor(
    readonly chain: PermissionChain,
    readonly tool: PermissionTool,
    readonly state: CallState,
    /** Walk every rule of the chain, without the rule views and the program index (tests). */
    readonly scan: boolean,
  ) {}
}

/**
 * Evaluates a call against a chain without executing anything: hooks (registration order), deny
 * layer (rules, expressions, readonly isolation, taint gate), ask layer, canUseTool, terminal
 * default. The first decisive verdict wins.
 *
 * Not an `async` function on purpose: most hooks answer synchronously, and a chain of awaits (one
 * per layer, plus a promise wrapping each hook's promise for its deadline) cost more than the rules
 * themselves. The layers run synchronously; when a hook or canUseTool returns a promise, one
 * promise for the whole call is created and the chain resumes from the next hook when it settles
 * (or fails closed when its deadline passes first). Any unexpected throw still rejects.
 */
export function evaluatePermission(
  chain: PermissionChain,
  tool: PermissionTool,
  input: unknown,
  context: EvaluationContext = EMPTY_CONTEXT,
): Promise<PermissionDecision> {
  return evaluate(chain, tool, input, context, false);
}

/**
 * {@link evaluatePermission} walking every rule in chain order, without the rule views and the
 * program index: what the indexes must agree with (exported for tests).
 */
export function evaluatePermissionByScan(
  chain: PermissionChain,
  tool: PermissionTool,
  input: unknown,
  context: EvaluationContext = EMPTY_CONTEXT,
): Promise<PermissionDecision> {
  return evaluate(chain, tool, input, context, true);
}

function evaluate(
  chain: PermissionChain,
  tool: PermissionTool,
  input: unknown,
  context: EvaluationContext,
  scan: boolean,
): Promise<PermissionDecision> {
  let ev: Evaluation;
  let d: PermissionDecision | undefined;
  try {
    if (!isPermissionChain(chain))
      throw new TypeError('evaluatePermission: not a compiled permission chain');
    const effectiveRisk: Risk | undefined = chain.riskOverrides.get(tool.name) ?? tool.risk;
    const riskClass: RiskClass = effectiveRisk ?? 'undeclared';
    const state = new CallState(
      tool.name,
      riskClass,
      RISK_BIT[riskClass] ?? RISK_BIT.undeclared,
      input,
      context,
    );
    ev = new Evaluation(chain, tool, state, scan);
    if (chain.hooks.length > 0 || chain.canUseTool !== undefined)
      ev.hookContext = makeHookContext(chain, tool, effectiveRisk, state);
    d = runHooks(ev, 0);
  } catch (err) {
    return Promise.reject(err);
  }
  if (d !== undefined) return Promise.resolve(d);
  return new Promise<PermissionDecision>((resolve, reject) => {
    ev.resolve = resolve;
    ev.reject = reject;
    awaitPending(ev);
  });
}

/** Runs hooks from `from`, then the rest of the chain; undefined when a promise is pending. */
function runHooks(ev: Evaluation, from: number): PermissionDecision | undefined {
  const hooks = ev.chain.hooks;
  const state = ev.state;
  for (let h = from; h < hooks.length; h++) {
    const hook = hooks[h]!;
    let result: unknown;
    try {
      result = hook.run(ev.tool.name, state.input, ev.hookContext!);
      if (isThenable(result)) {
        ev.waitingOn = h;
        ev.pending = result;
        return undefined;
      }
    } catch (err) {
      return hookFailed(ev, h, err);
    }
    const d = hookResult(ev, h, result);
    if (d !== CONTINUE) return d;
  }
  return runRules(ev);
}

/** Sentinel: the hook passed, go on. */
const CONTINUE: PermissionDecision = Object.freeze({}) as PermissionDecision;

/** A decision by hook `h`: the hook's description is the rule. */
function byHook(
  ev: Evaluation,
  h: number,
  verdict: Verdict,
  reason: string | undefined,
): PermissionDecision {
  return decision(ev.chain, ev.state, verdict, 'hook', ev.chain.hooks[h]!.description, reason);
}

/** A decision by canUseTool: its description is the rule. */
function byCanUseTool(
  ev: Evaluation,
  verdict: Verdict,
  reason: string | undefined,
): PermissionDecision {
  return decision(
    ev.chain,
    ev.state,
    verdict,
    'canUseTool',
    ev.chain.canUseTool!.description,
    reason,
  );
}

function hookFailed(ev: Evaluation, h: number, err: unknown): PermissionDecision {
  const name = ev.chain.hooks[h]!.name;
  return byHook(
    ev,
    h,
    'deny',
    `permission hook '${name}' failed, so the call is denied: ${errorText(err)}`,
  );
}

function hookResult(ev: Evaluation, h: number, value: unknown): PermissionDecision {
  if (value === undefined) return CONTINUE;
  const name = ev.chain.hooks[h]!.name;
  const own = reasonOf(value);
  const result = own === undefined ? value : (value as ReasonedVerdict).verdict;
  if (isVerdict(result)) {
    if (result === 'allow') {
      // A hook's allow does not reach a protected path: only the policy naming it does.
      const guarded = protectedDecision(ev.chain, ev.state, ev.chain.protectedPaths.effect);
      if (guarded !== undefined) return guarded;
    }
    return byHook(
      ev,
      h,
      result,
      result === 'allow' && own === undefined
        ? undefined
        : `permission hook '${name}' returned ${result}${own === undefined ? '' : `: ${own}`}`,
    );
  }
  if (isModifiedInput(result)) {
    ev.state.substitute(result.modifiedInput);
    return CONTINUE;
  }
  return byHook(
    ev,
    h,
    'deny',
    `permission hook '${name}' returned an invalid verdict, so the call is denied`,
  );
}

function canFailed(ev: Evaluation, err: unknown): PermissionDecision {
  return byCanUseTool(ev, 'deny', `canUseTool failed, so the call is denied: ${errorText(err)}`);
}

/** Races the pending promise against its deadline, then resumes the chain. */
function awaitPending(ev: Evaluation): void {
  const pending = ev.pending!;
  ev.pending = undefined;
  const waitingOn = ev.waitingOn;
  const timeoutMs =
    waitingOn === CAN_USE_TOOL
      ? ev.chain.canUseTool!.timeoutMs
      : ev.chain.hooks[waitingOn]!.timeoutMs;
  const deadline = startDeadline(timeoutMs, (err) => finish(ev, failed(ev, waitingOn, err)));
  try {
    pending.then(
      (value) => {
        if (settleDeadline(deadline)) resumeWith(ev, waitingOn, value);
      },
      (err: unknown) => {
        if (settleDeadline(deadline)) finish(ev, failed(ev, waitingOn, err));
      },
    );
  } catch (err) {
    // A thenable whose then() throws fails like a rejected promise.
    if (settleDeadline(deadline)) finish(ev, failed(ev, waitingOn, err));
  }
}

function failed(ev: Evaluation, waitingOn: number, err: unknown): PermissionDecision {
  return waitingOn === CAN_USE_TOOL ? canFailed(ev, err) : hookFailed(ev, waitingOn, err);
}

/** Continues after a pending hook or canUseTool answered `value`. */
function resumeWith(ev: Evaluation, waitingOn: number, value: unknown): void {
  let d: PermissionDecision | undefined;
  try {
    if (isThenable(value)) {
      // A foreign thenable fulfilled with another thenable: follow it like `await` would (the
      // deadline already stopped, as it did when this was awaited).
      Promise.resolve(value).then(
        (v) => resumeWith(ev, waitingOn, v),
        (err: unknown) => finish(ev, failed(ev, waitingOn, err)),
      );
      return;
    }
  } catch (err) {
    finish(ev, failed(ev, waitingOn, err));
    return;
  }
  try {
    if (waitingOn === CAN_USE_TOOL) d = canResult(ev, value);
    else {
      d = hookResult(ev, waitingOn, value);
      if (d === CONTINUE) d = runHooks(ev, waitingOn + 1);
    }
  } catch (err) {
    ev.reject!(err);
    return;
  }
  if (d === undefined) awaitPending(ev);
  else finish(ev, d);
}

function finish(ev: Evaluation, d: PermissionDecision): void {
  ev.resolve!(d);
}

/** Layers 2–5: deny, ask, canUseTool, default. Undefined when canUseTool's promise is pending. */
function runRules(ev: Evaluation): PermissionDecision | undefined {
  const { chain, tool, state } = ev;
  const context = state.context;
  const riskClass = state.riskClass;
  // 2. Deny layer.
  if (chain.readonly || context.isolation === 'readonly') {
    if ((state.riskBit & READONLY_MASK) !== 0) {
      return decision(
        chain,
        state,
        'deny',
        'deny-rule',
        READONLY_RULE,
        `readonly isolation denies ${riskClass} tools`,
      );
    }
  }
  const protection = chain.protectedPaths;
  if (protection.effect === 'deny') {
    const d = protectedDecision(chain, state, 'deny');
    if (d !== undefined) return d;
  }
  const view = ev.scan
    ? fullView(chain)
    : ruleView(chain, state.toolName, riskClass, state.riskBit);
  let uncertain: RuleEntry | undefined;
  let uncertainWhy = '';
  // A matchable command (every segment analysed) needs only the argv rules naming one of its
  // programs, a fetch of a known host only the domain rules naming it: every other such rule would
  // answer NO. Otherwise (a segment left unmatchable, no command, no host) they could answer
  // UNKNOWN, so then every rule of the view is walked.
  const indexed = view.denyIndex !== undefined || view.askIndex !== undefined;
  const keys = indexed ? indexKeys(state) : undefined;
  // A command that runs code the matcher cannot see walks every rule (any may ask), but only the
  // rules its keys name can match it: the others are only asked whether they could cover that code.
  const matchable = indexed && keys === undefined ? keysDespiteUnseen(state) : undefined;
  const deny =
    keys !== undefined && view.denyIndex !== undefined
      ? narrow(view.deny, view.denyIndex, keys)
      : view.deny;
  const denyMatchable =
    matchable !== undefined && view.denyIndex !== undefined
      ? new Set(narrow(view.deny, view.denyIndex, matchable))
      : undefined;
  for (let r = 0; r < deny.length; r++) {
    const entry = deny[r]!;
    const m =
      denyMatchable === undefined || denyMatchable.has(entry)
        ? matchEntry(entry, state)
        : unseenOnly(entry, state);
    if (m === MATCH)
      return decision(chain, state, 'deny', 'deny-rule', entry.description, entry.reason);
    if (m === UNKNOWN && uncertain === undefined) {
      uncertain = entry;
      uncertainWhy = uncertainReason(entry, state);
    }
  }
  const isEgress =
    riskClass === 'network' ||
    tool.name === FETCH_TOOL_NAME ||
    chain.taint.egressTools.has(tool.name);
  if (context.taint !== undefined && isEgress) {
    const diagnostics: PermissionDiagnostic[] = [];
    const closes = taintGateCloses(
      chain.taint,
      {
        tool: tool.name,
        isEgress,
        taint: context.taint,
        clearance: tool.clearance,
        target: state.target(),
        fetchHost: state.host(),
        facts: () => state.facts(),
        expressionContext: () => state.expressionContext(),
      },
      diagnostics,
    );
    for (const d of diagnostics) state.report(d);
    if (closes) {
      const clearance = tool.clearance ?? 'public';
      return decision(
        chain,
        state,
        'deny',
        'deny-rule',
        {
          source: 'taint-gate',
          kind: 'taint-gate',
          taint: context.taint,
          clearance,
          target: state.target() ?? null,
        },
        `the call carries ${context.taint} data and ${tool.name} is cleared for ${clearance} data only`,
      );
    }
  }
  if (uncertain !== undefined) {
    return decision(
      chain,
      state,
      'ask',
      'deny-rule',
      uncertain.description,
      uncertainWhy,
      uncertain.timeoutMs,
      'deny',
    );
  }

  // 3. Ask layer: protected paths first, then the rules.
  if (protection.effect === 'ask') {
    const d = protectedDecision(chain, state, 'ask');
    if (d !== undefined) return d;
  }
  const ask =
    keys !== undefined && view.askIndex !== undefined
      ? narrow(view.ask, view.askIndex, keys)
      : view.ask;
  const askMatchable =
    matchable !== undefined && view.askIndex !== undefined
      ? new Set(narrow(view.ask, view.askIndex, matchable))
      : undefined;
  for (let r = 0; r < ask.length; r++) {
    const entry = ask[r]!;
    const m =
      askMatchable === undefined || askMatchable.has(entry)
        ? matchEntry(entry, state)
        : unseenOnly(entry, state);
    if (m === MATCH)
      return decision(
        chain,
        state,
        'ask',
        'ask-rule',
        entry.description,
        entry.reason,
        entry.timeoutMs,
        entry.onTimeout,
      );
    if (m === UNKNOWN) {
      return decision(
        chain,
        state,
        'ask',
        'ask-rule',
        entry.description,
        uncertainReason(entry, state),
        entry.timeoutMs,
        'deny',
      );
    }
  }

  // 4. canUseTool.
  const can = chain.canUseTool;
  if (can !== undefined) {
    let result: unknown;
    try {
      result = can.run(tool.name, state.input, ev.hookContext!);
      if (isThenable(result)) {
        ev.waitingOn = CAN_USE_TOOL;
        ev.pending = result;
        return undefined;
      }
    } catch (err) {
      return canFailed(ev, err);
    }
    return canResult(ev, result);
  }
  return terminal(ev);
}

/**
 * The decision for a call that writes a protected path: `effect` (ask or deny), decided by the
 * deny or ask layer with the protected path as its rule. A write the chain cannot pin down (a
 * redirection to `$OUT`) asks, whatever the effect. Undefined when the call writes none. An ask
 * here never times out into an allow.
 */
function protectedDecision(
  chain: PermissionChain,
  state: CallState,
  effect: 'ask' | 'deny',
): PermissionDecision | undefined {
  const hit = state.protectedWrite(chain);
  if (hit === undefined) return undefined;
  if (hit.kind === 'unknown') {
    return decision(
      chain,
      state,
      'ask',
      effect === 'deny' ? 'deny-rule' : 'ask-rule',
      { source: 'protected-paths', kind: 'protected-path', layer: effect, path: null },
      `${hit.why}, so whether it writes a protected path cannot be checked and the call needs approval`,
      undefined,
      'deny',
    );
  }
  const { path, pattern } = hit.match;
  const rule: MatchedRule = {
    source: 'protected-paths',
    kind: 'protected-path',
    layer: effect,
    path,
    pattern,
  };
  return effect === 'deny'
    ? decision(
        chain,
        state,
        'deny',
        'deny-rule',
        rule,
        `${path} is a protected path (${pattern}): the policy denies writing it`,
      )
    : decision(
        chain,
        state,
        'ask',
        'ask-rule',
        rule,
        `${path} is a protected path (${pattern}): writing it needs approval`,
        undefined,
        'deny',
      );
}

/** The reason canUseTool's decisive verdicts report. */
const CAN_USE_TOOL_REASON: Readonly<Record<Verdict, string | undefined>> = {
  allow: undefined,
  deny: 'canUseTool denied the call',
  ask: 'canUseTool asked for approval',
};

function canResult(ev: Evaluation, value: unknown): PermissionDecision {
  const own = reasonOf(value);
  const result = own === undefined ? value : (value as ReasonedVerdict).verdict;
  if (isVerdict(result)) {
    return byCanUseTool(
      ev,
      result,
      own === undefined ? CAN_USE_TOOL_REASON[result] : `canUseTool returned ${result}: ${own}`,
    );
  }
  if (isModifiedInput(result)) ev.state.substitute(result.modifiedInput);
  else if (result !== undefined)
    return byCanUseTool(
      ev,
      'deny',
      'canUseTool returned an invalid verdict, so the call is denied',
    );
  return terminal(ev);
}

/** 5. The terminal default. */
function terminal(ev: Evaluation): PermissionDecision {
  const { chain, tool, state } = ev;
  if (tool.needsApproval === true) {
    return decision(chain, state, 'ask', 'default', undefined, `${tool.name} requires approval`);
  }
  return decision(chain, state, 'allow', 'default', undefined, undefined);
}

/** Risk class → slot in a chain's rule-view cache. */
const RISK_SLOT: ReadonlyMap<string, number> = new Map(
  RiskClassSchema.options.map((r, i) => [r, i]),
);
const RULE_VIEW_TOOL_LIMIT = 1_024;

/**
 * The chain's deny and ask rules that can match this tool name and risk class, in chain order.
 * A realistic chain has dozens of rules of which a handful name a given tool; filtering once per
 * (tool, risk) instead of walking every rule on every call. Only rules that are certain not to
 * match (their tool, risk, argv-or-domain target, or a `tool ==` / `risk ==` guard of an
 * expression rules them out) are left out, so the first match is the same as over the full lists.
 */
function ruleView(
  chain: PermissionChain,
  toolName: string,
  riskClass: string,
  riskBit: number,
): RuleView {
  const slot = RISK_SLOT.get(riskClass);
  if (slot === undefined) return fullView(chain);
  const cache = chain.ruleViews;
  let views = cache.get(toolName);
  if (views === undefined) {
    if (cache.size >= RULE_VIEW_TOOL_LIMIT) cache.clear();
    views = new Array<RuleView | undefined>(RISK_SLOT.size).fill(undefined);
    cache.set(toolName, views);
  }
  let view = views[slot];
  if (view === undefined) {
    const canMatch = (e: RuleEntry): boolean => ruleMayMatch(e, toolName, riskClass, riskBit);
    const deny = chain.deny.filter(canMatch);
    const ask = chain.ask.filter(canMatch);
    const indexed = toolName === SHELL_TOOL_NAME || toolName === FETCH_TOOL_NAME;
    view = views[slot] = {
      deny,
      ask,
      denyIndex: indexed ? ruleIndex(deny) : undefined,
      askIndex: indexed ? ruleIndex(ask) : undefined,
    };
  }
  return view;
}

/** The whole chain as one view, unindexed. */
function fullView(chain: PermissionChain): RuleView {
  return { deny: chain.deny, ask: chain.ask, denyIndex: undefined, askIndex: undefined };
}

/**
 * Below this many argv and domain rules in a layer, walking them costs less than picking them
 * out: the index is built for larger layers only.
 */
const RULE_INDEX_MIN_KEYED_RULES = 8;

/**
 * The keys each argv or domain rule is filed under (see {@link RuleIndex}); undefined for a rule
 * no key narrows down. The shell tool's views only have argv rules of these two kinds, the fetch
 * tool's only domain rules (see {@link ruleMayMatch}).
 */
function keysOfRule(entry: RuleEntry): Set<string> | undefined {
  if (entry.kind !== 'rule') return undefined;
  const keys = new Set<string>();
  if (entry.argv !== undefined) {
    for (const pattern of entry.argv) {
      const first = pattern.tokens[0];
      // `* …` or a bare `**`: any program.
      if (first === undefined || first.kind !== 'literal') return undefined;
      const second = pattern.tokens[1];
      keys.add(second?.kind === 'literal' ? `${first.text}\0${second.text}` : first.text);
    }
    return keys;
  }
  if (entry.hosts !== undefined) {
    for (const pattern of entry.hosts) {
      if (pattern.exact !== undefined) keys.add(`=${pattern.exact}`);
      else if (pattern.suffix !== undefined) keys.add(pattern.suffix);
      else return undefined;
    }
    return keys;
  }
  return undefined;
}

/** A layer's rules by key (see {@link RuleIndex}); undefined when few rules have keys. */
export function ruleIndex(
  rules: readonly RuleEntry[],
  minKeyedRules = RULE_INDEX_MIN_KEYED_RULES,
): RuleIndex | undefined {
  const always: number[] = [];
  const byKey = new Map<string, number[]>();
  let keyed = 0;
  rules.forEach((entry, position) => {
    const keys = keysOfRule(entry);
    if (keys === undefined) {
      always.push(position);
      return;
    }
    keyed++;
    for (const key of keys) {
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [position]);
      else list.push(position);
    }
  });
  if (keyed < minKeyedRules) return undefined;
  return { always, alwaysRules: always.map((position) => rules[position]!), byKey };
}

/**
 * The keys of this call (see {@link RuleIndex}): the first word of every argv a command's segments
 * are matched as and its first two words, or the fetched host and its dot-led suffixes (`a.b.example` → `=a.b.example`,
 * `.b.example`, `.example`). Undefined when the call cannot be narrowed (see {@link runRules}).
 */
function indexKeys(state: CallState): string[] | undefined {
  return callKeys(state, false);
}

/**
 * The keys of a shell command whose segments are all matchable but run code the matcher cannot
 * see: the rules they name are the only ones that can match it (see {@link unseenOnly}).
 */
function keysDespiteUnseen(state: CallState): string[] | undefined {
  if (state.toolName === FETCH_TOOL_NAME) return undefined;
  return callKeys(state, true);
}

/**
 * What a keyed argv rule the call's keys do not name answers: it cannot match any candidate, so
 * it only asks when it could cover code the matcher cannot see (as {@link matchTableRule} would).
 */
function unseenOnly(entry: RuleEntry, state: CallState): Match {
  if (entry.kind !== 'rule' || entry.argv === undefined) return matchEntry(entry, state);
  if (entry.tools !== undefined && !entry.tools.has(state.toolName)) return NO;
  if (entry.riskMask !== 0 && (entry.riskMask & state.riskBit) === 0) return NO;
  if (state.toolName !== SHELL_TOOL_NAME) return NO;
  const segments = state.shellSegments();
  if (segments === undefined) return UNKNOWN;
  for (let s = 0; s < segments.length; s++) {
    if (unseenCoveredBy(entry.argv, segments[s]!) !== undefined) return UNKNOWN;
  }
  return NO;
}

function callKeys(state: CallState, despiteUnseen: boolean): string[] | undefined {
  if (state.toolName === FETCH_TOOL_NAME) {
    const host = state.host();
    if (host === undefined) return undefined;
    const keys = [`=${host}`];
    for (let i = host.indexOf('.'); i >= 0; i = host.indexOf('.', i + 1)) keys.push(host.slice(i));
    return keys;
  }
  const segments = state.shellSegments();
  if (segments === undefined) return undefined;
  const keys: string[] = [];
  for (let s = 0; s < segments.length; s++) {
    const seg = segments[s]!;
    // Unseen code may match a rule whatever its key (a program the table does not know may be a
    // renamed copy of any program).
    if (seg.unmatchable !== undefined || (seg.unseen.length > 0 && !despiteUnseen))
      return undefined;
    const candidates = seg.candidates;
    for (let c = 0; c < candidates.length; c++) {
      const argv = candidates[c]!;
      const program = argv[0];
      if (program === undefined) continue;
      if (!keys.includes(program)) keys.push(program);
      if (argv.length > 1) {
        const subcommand = `${program}\0${argv[1]!}`;
        if (!keys.includes(subcommand)) keys.push(subcommand);
      }
    }
  }
  return keys;
}

/** The rules of `rules` a call with these keys needs, in their order (see {@link RuleIndex}). */
export function narrow(
  rules: readonly RuleEntry[],
  index: RuleIndex,
  keys: readonly string[],
): readonly RuleEntry[] {
  let positions: number[] | undefined;
  for (let k = 0; k < keys.length; k++) {
    const named = index.byKey.get(keys[k]!);
    if (named === undefined) continue;
    if (positions === undefined) positions = index.always.concat(named);
    else for (let i = 0; i < named.length; i++) positions.push(named[i]!);
  }
  if (positions === undefined) return index.alwaysRules;
  positions.sort((a, b) => a - b);
  const out: RuleEntry[] = [];
  let last = -1;
  for (let i = 0; i < positions.length; i++) {
    const position = positions[i]!;
    if (position !== last) out.push(rules[position]!);
    last = position;
  }
  return out;
}

/** False only when `entry` cannot match any call of this tool name and risk class (exported for tests). */
export function ruleMayMatch(
  entry: RuleEntry,
  toolName: string,
  riskClass: string,
  riskBit: number,
): boolean {
  if (entry.kind === 'expression') {
    for (const g of entry.expr.guards) {
      if (g.variable === 'tool' && g.value !== toolName) return false;
      if (g.variable === 'risk' && g.value !== riskClass) return false;
    }
    return true;
  }
  if (entry.tools !== undefined && !entry.tools.has(toolName)) return false;
  if (entry.riskMask !== 0 && (entry.riskMask & riskBit) === 0) return false;
  // Same order as matchTableRule: argv rules match the shell tool only (and decide on argv first),
  // domain rules are enforced for the fetch tool only.
  if (entry.argv !== undefined) return toolName === SHELL_TOOL_NAME;
  if (entry.hosts !== undefined) return toolName === FETCH_TOOL_NAME;
  return true;
}

/**
 * One rule against one call, outside any chain: whether it matches and what it reports. For tests
 * that check the rule index against the rules themselves.
 */
export function matchRuleAlone(
  entry: RuleEntry,
  toolName: string,
  riskClass: RiskClass,
  input: unknown,
): { match: 'no' | 'match' | 'unknown'; diagnostics: number } {
  const state = new CallState(toolName, riskClass, RISK_BIT[riskClass], input, EMPTY_CONTEXT);
  const m = matchEntry(entry, state);
  return {
    match: m === MATCH ? 'match' : m === UNKNOWN ? 'unknown' : 'no',
    diagnostics: state.diagnostics?.length ?? 0,
  };
}

function matchEntry(entry: RuleEntry, state: CallState): Match {
  if (entry.kind === 'expression') {
    const r = entry.expr.evaluate(state.facts(), state);
    if (r.error !== undefined) {
      state.report({ kind: 'expression-error', rule: entry.description, message: r.error });
      return UNKNOWN;
    }
    return r.value ? MATCH : NO;
  }
  return matchTableRule(entry, state);
}

function matchTableRule(rule: TableRuleEntry, state: CallState): Match {
  if (rule.tools !== undefined && !rule.tools.has(state.toolName)) return NO;
  if (rule.riskMask !== 0 && (rule.riskMask & state.riskBit) === 0) return NO;
  let result: Match = MATCH;
  if (rule.argv !== undefined) {
    if (state.toolName !== SHELL_TOOL_NAME) return NO;
    const segments = state.shellSegments();
    if (segments === undefined) return UNKNOWN;
    result = NO;
    for (let s = 0; s < segments.length; s++) {
      const seg = segments[s]!;
      // An unmatchable segment keeps the candidates it has: a pattern that matches one of them
      // (`python3 **` against inline python code) decides; otherwise nothing can be told.
      if (segmentMatchesAny(rule.argv, seg) !== undefined) return MATCH;
      // So does code it runs that the matcher cannot see (a script, a program it does not know)
      // when the rule could match what runs there.
      if (seg.unmatchable !== undefined || unseenCoveredBy(rule.argv, seg) !== undefined)
        result = UNKNOWN;
    }
    if (result === NO) return NO;
  }
  if (rule.hosts !== undefined) {
    // Enforced for the fetch tool only; for every other tool a domain rule is advisory.
    if (state.toolName !== FETCH_TOOL_NAME) return NO;
    const host = state.host();
    if (host === undefined) return UNKNOWN;
    if (matchHost(rule.hosts, host) === undefined) return NO;
  }
  return result;
}

function uncertainReason(entry: RuleEntry, state: CallState): string {
  if (entry.kind === 'expression') {
    return `the policy expression ${entry.expr.source} could not be evaluated, so the call needs approval`;
  }
  if (entry.argv !== undefined) {
    const segments = state.shellSegments();
    const seg = segments?.find((s) => s.unmatchable !== undefined);
    if (seg === undefined && segments !== undefined) {
      for (const s of segments) {
        const covered = unseenCoveredBy(entry.argv, s);
        if (covered !== undefined)
          return `the command runs code the matcher cannot read (${covered.code.reason}) that could do what the rule ${covered.pattern.source} matches, so it needs approval`;
      }
    }
    const why = seg?.unmatchable ?? 'the command is missing';
    return `the command cannot be checked against the policy (${why}), so it needs approval`;
  }
  return 'the target host cannot be determined, so the call needs approval';
}

function decision(
  chain: PermissionChain,
  state: CallState,
  verdict: Verdict,
  decidedBy: DecidedBy,
  rule: MatchedRule | undefined,
  reason: string | undefined,
  timeoutMs?: number,
  onTimeout?: OnTimeout,
): PermissionDecision {
  const out: {
    -readonly [K in keyof PermissionDecision]: PermissionDecision[K];
  } = {
    verdict,
    decidedBy,
    input: state.input,
    advisory:
      chain.domainRules.length > 0 && state.toolName !== FETCH_TOOL_NAME
        ? advisoryMatches(chain, state)
        : NO_ADVISORY,
    risk: state.riskClass,
    diagnostics: state.diagnostics ?? NO_DIAGNOSTICS,
  };
  if (rule !== undefined) out.rule = rule;
  if (reason !== undefined) out.reason = reason;
  if (verdict === 'ask') {
    out.approval = {
      timeoutMs: timeoutMs ?? chain.approval.timeoutMs,
      onTimeout: onTimeout ?? chain.approval.onTimeout,
    };
  }
  return out;
}

function advisoryMatches(chain: PermissionChain, state: CallState): readonly AdvisoryMatch[] {
  let hosts: readonly string[] | undefined;
  const out: AdvisoryMatch[] = [];
  for (const { layer, rule } of chain.domainRules) {
    if (rule.tools !== undefined && !rule.tools.has(state.toolName)) continue;
    if (rule.riskMask !== 0 && (rule.riskMask & state.riskBit) === 0) continue;
    hosts ??= hostsMentioned(state.input);
    // Nearly every input names no host: then no rule can add a match.
    if (hosts.length === 0) return NO_ADVISORY;
    for (const host of hosts) {
      if (rule.hosts !== undefined && matchHost(rule.hosts, host) !== undefined)
        out.push({ layer, host, rule: rule.description });
    }
  }
  return out.length > 0 ? out : NO_ADVISORY;
}

function makeHookContext(
  chain: PermissionChain,
  tool: PermissionTool,
  risk: Risk | undefined,
  state: CallState,
): HookContext {
  const c = state.context;
  return {
    agent: c.agent,
    taint: c.taint,
    isolation: c.isolation,
    target: c.target,
    profile: c.profile ?? chain.profile,
    tool: {
      name: tool.name,
      risk,
      needsApproval: tool.needsApproval === true,
      clearance: tool.clearance,
    },
  };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function isVerdict(value: unknown): value is Verdict {
  return value === 'allow' || value === 'deny' || value === 'ask';
}

/** The hook's own reason when `value` is a {@link ReasonedVerdict}; undefined otherwise. */
function reasonOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || isModifiedInput(value)) return undefined;
  const v = value as { verdict?: unknown; reason?: unknown };
  return isVerdict(v.verdict) && typeof v.reason === 'string' ? v.reason : undefined;
}

function isModifiedInput(value: unknown): value is { modifiedInput: unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.prototype.hasOwnProperty.call(value, 'modifiedInput')
  );
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message.split('\n')[0] || err.name;
  return typeof err === 'string' ? err : 'a non-error value was thrown';
}
