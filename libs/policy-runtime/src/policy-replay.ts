import {
  errorCapOfRule,
  errorCapRule,
  toWireError,
  type DecidedEvent,
  type RequestedEvent,
  type Verdict,
  type WhatIfHookUse,
  type WhatIfVerdict,
} from '@toolgate/contracts';
import {
  compilePolicyDocument,
  DEFAULT_HOOK_TIMEOUT_MS,
  evaluatePermission,
  type CanUseToolResult,
  type CompiledPolicy,
  type HookResult,
  type LayerClosures,
  type NamedHook,
} from '@toolgate/permissions';
import {
  errorCapOf,
  validateStoredPolicy,
  type RemoteLayer,
  type StoredPolicy,
} from './stored-policy';

/** A call as the journal recorded it: what was asked, and what the chain decided then. */
export interface RecordedCall {
  requested: RequestedEvent;
  decided: DecidedEvent;
  /** The stream sequence of `decided`. */
  seq: number;
}

/** What a candidate policy decides for a recorded call, next to what was decided then. */
export type ReplayedCall =
  | {
      kind: 'replayed';
      before: WhatIfVerdict & { policyRevision: number };
      after: WhatIfVerdict;
      changed: boolean;
      /** Whether a remote hook's recorded verdict was given again, or one had to be assumed. */
      hooks?: WhatIfHookUse;
    }
  /** Not a decision of the chain (the run's error cap refused the call before it ran). */
  | { kind: 'error-cap' };

/**
 * A candidate policy compiled for replaying recorded calls: the pure chain of the permissions
 * library, with every remote hook and canUseTool replaced by a stand-in that answers from the
 * record instead of asking a team's service (a replay never calls out):
 *
 * - The chain evaluates the post-hook input recorded in `decided`, with the recorded tool
 *   reference, agent, profile and isolation, and the taint of the `requested` event.
 * - A hook the record shows deciding (`decidedBy: hook`, rule naming it) gives its recorded verdict
 *   again (`reused`). When the record shows the call went past the hooks, every hook passes, as
 *   they did then (they substituted the input the record holds). When another hook decided, the
 *   record cannot tell what this one answers: it passes, and the call is marked `unknown`.
 * - canUseTool gives its recorded verdict when it decided; when the recorded call reached the
 *   default, it passed then and passes now; when the recorded decision came before canUseTool (a
 *   rule or a hook decided), its answer is not recorded: it passes, and the call is `unknown`.
 *
 * Stand-ins answer synchronously, so each evaluation completes before the next one starts and the
 * stand-ins can read the call being replayed from this object.
 */
export class PolicyReplay {
  private current: RecordedCall | undefined = undefined;
  private hookUse: WhatIfHookUse | undefined = undefined;
  private readonly compiled: CompiledPolicy;

  private constructor(readonly policy: StoredPolicy) {
    const { remote, approvals: _approvals, errorCap: _errorCap, ...doc } = policy;
    const closures = (layer: RemoteLayer | undefined): LayerClosures => ({
      ...(layer?.hooks
        ? {
            hooks: layer.hooks.map((h): NamedHook => ({
              name: `remote:${h.name}`,
              timeoutMs: h.timeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS,
              run: () => this.hookAnswer(`remote:${h.name}`),
            })),
          }
        : {}),
      ...(layer?.canUseTool ? { canUseTool: () => this.canUseToolAnswer() } : {}),
    });
    const profiles: Record<string, LayerClosures> = {};
    for (const [name, layer] of Object.entries(remote?.profiles ?? {}))
      profiles[name] = closures(layer);
    this.compiled = compilePolicyDocument(doc, {
      ...(remote?.engine ? { engine: closures(remote.engine) } : {}),
      profiles,
    });
  }

  /**
   * Validates `document` as `PUT /v1/policy` would and compiles it with stand-ins for its remote
   * hooks. @throws ConfigError for a document a put would refuse
   */
  static compile(document: unknown): PolicyReplay {
    return new PolicyReplay(validateStoredPolicy(document));
  }

  /** The candidate's consecutive-error cap (null: none). */
  get errorCap(): number | null {
    return errorCapOf(this.policy);
  }

  /**
   * The candidate's verdict for a recorded call, beside the recorded one. A call the run's error
   * cap refused is not the chain's decision: nothing to replay, unless `throughErrorCap` (the
   * candidate's cap would not refuse it), when its chain decides it.
   */
  async replay(call: RecordedCall, { throughErrorCap = false } = {}): Promise<ReplayedCall> {
    const { requested, decided } = call;
    if (errorCapOfRule(decided.rule) && !throughErrorCap) return { kind: 'error-cap' };
    const before = {
      ...verdictOf(decided),
      policyRevision: decided.policyRevision,
    };
    this.current = call;
    this.hookUse = undefined;
    let after: WhatIfVerdict;
    try {
      const chain = this.compiled.chainFor(decided.profile);
      // Stand-ins answer synchronously: this promise is settled before anything else runs.
      const decision = await evaluatePermission(chain, decided.tool, decided.input, {
        agent: decided.agent,
        isolation: decided.isolation,
        taint: requested.taint,
        profile: decided.profile,
      });
      after = verdictOf(decision);
    } catch (err) {
      // As the evaluator does: a chain that cannot evaluate (an unknown profile) denies.
      after = {
        verdict: 'deny',
        decidedBy: 'default',
        reason: `policy could not be evaluated: ${toWireError(err).message}`,
      };
    }
    const hooks = this.hookUse;
    this.current = undefined;
    return {
      kind: 'replayed',
      before,
      after,
      changed: before.verdict !== after.verdict,
      ...(hooks ? { hooks } : {}),
    };
  }

  /**
   * A recorded call the candidate's error cap refuses (its run's streak at `failures`): a denial
   * as the evaluator records one, beside the recorded verdict.
   */
  refusedByErrorCap(call: RecordedCall, failures: number): ReplayedCall {
    const consecutive = this.errorCap ?? failures;
    const before = { ...verdictOf(call.decided), policyRevision: call.decided.policyRevision };
    return {
      kind: 'replayed',
      before,
      after: {
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: errorCapRule({ failures, consecutive }),
        reason: `the run's last ${failures} calls ended in an error or a denial (cap ${consecutive})`,
      },
      changed: before.verdict !== 'deny',
    };
  }

  private hookAnswer(name: string): HookResult {
    const decided = this.current!.decided;
    if (decided.decidedBy === 'hook') {
      if (ruleName(decided.rule) === name) {
        this.use('reused');
        return decided.verdict;
      }
      this.use('unknown');
      return undefined;
    }
    return undefined;
  }

  private canUseToolAnswer(): CanUseToolResult {
    const decided = this.current!.decided;
    if (decided.decidedBy === 'canUseTool') {
      this.use('reused');
      // canUseTool never answers ask on the wire (it is turned into a deny).
      return decided.verdict === 'allow' ? 'allow' : 'deny';
    }
    if (decided.decidedBy !== 'default') this.use('unknown');
    return undefined;
  }

  private use(kind: WhatIfHookUse): void {
    // One guess makes the whole call depend on a hook; a reuse alone does not.
    if (this.hookUse !== 'unknown') this.hookUse = kind;
  }
}

function verdictOf(d: {
  verdict: Verdict;
  decidedBy: WhatIfVerdict['decidedBy'];
  rule?: unknown;
  reason?: string | undefined;
}): WhatIfVerdict {
  return {
    verdict: d.verdict,
    decidedBy: d.decidedBy,
    ...(d.rule !== undefined ? { rule: d.rule } : {}),
    ...(d.reason !== undefined ? { reason: d.reason } : {}),
  };
}

function ruleName(rule: unknown): unknown {
  return typeof rule === 'object' && rule !== null ? (rule as { name?: unknown }).name : undefined;
}
