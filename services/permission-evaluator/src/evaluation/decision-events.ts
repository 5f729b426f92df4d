import {
  approvalKey,
  errorCapOfRule,
  errorCapRule,
  ErrorCode,
  type ErrorCapFacts,
  inputDigest,
  journalEvent,
  type DecidedEvent,
  type JournalEvent,
  type RequestedEvent,
} from '@toolgate/contracts';
import { DEFAULT_APPROVAL_TIMEOUT_MS, type PermissionDecision } from '@toolgate/permissions';

/** The policy's answer for one requested call, with what it was decided under. */
export interface ChainAnswer {
  decision: Pick<
    PermissionDecision,
    'verdict' | 'decidedBy' | 'rule' | 'reason' | 'input' | 'advisory' | 'approval'
  >;
  revision: number;
  separationOfDuties: boolean;
}

/**
 * The chain's own defaults, for an ask whose answer carries no approval settings (a redelivery
 * completing an ask recorded earlier, when today's answer is not an ask).
 */
const DEFAULT_APPROVAL = { timeoutMs: DEFAULT_APPROVAL_TIMEOUT_MS, onTimeout: 'deny' as const };

/** The `decided` event for a requested call (pure: time comes in). */
export function decidedFor(requested: RequestedEvent, answer: ChainAnswer, at: Date): DecidedEvent {
  const { decision } = answer;
  return journalEvent({
    type: 'decided',
    id: `${requested.dispatchId}:decided`,
    tenant: requested.tenant,
    runId: requested.runId,
    dispatchId: requested.dispatchId,
    at: at.toISOString(),
    causationId: requested.id,
    verdict: decision.verdict,
    decidedBy: decision.decidedBy,
    ...(decision.rule !== undefined ? { rule: decision.rule } : {}),
    ...(decision.reason ? { reason: decision.reason.slice(0, 2048) } : {}),
    policyRevision: answer.revision,
    inputDigest: inputDigest(decision.input),
    input: decision.input ?? null,
    advisory: [...decision.advisory],
    tool: requested.tool,
    agent: requested.agent,
    isolation: requested.isolation,
    ...(requested.profile ? { profile: requested.profile } : {}),
  });
}

/**
 * What follows a decision (pure): a deny settles the dispatch with the policy reason (what the
 * model sees); an ask parks it with its approval key, expiry and timeout decision; an allow needs
 * nothing more from the evaluator (the executor acts on `decided`).
 */
export function followUpsFor(
  requested: RequestedEvent,
  decided: DecidedEvent,
  answer: Pick<ChainAnswer, 'separationOfDuties'> & {
    approval?: { timeoutMs: number; onTimeout: 'allow' | 'deny' } | undefined;
  },
  at: Date,
): JournalEvent[] {
  const base = {
    tenant: decided.tenant,
    runId: decided.runId,
    dispatchId: decided.dispatchId,
    at: at.toISOString(),
    causationId: decided.id,
  };
  if (decided.verdict === 'deny') {
    const cap = errorCapOfRule(decided.rule);
    const ending = cap
      ? {
          // Refused by the run's error cap: an error the model sees as such, not a policy denial.
          outcome: 'error' as const,
          error: {
            code: ErrorCode.ErrorCap,
            message: decided.reason ?? 'the run reached its consecutive-error cap',
            details: { ...cap, runId: decided.runId },
          },
        }
      : {
          outcome: 'denied' as const,
          error: {
            code: ErrorCode.Denied,
            message:
              decided.reason ?? `${decided.tool.name} was denied by policy (${decided.decidedBy})`,
            details: { decidedBy: decided.decidedBy, policyRevision: decided.policyRevision },
          },
        };
    return [
      journalEvent({
        ...base,
        type: 'settled',
        id: `${decided.dispatchId}:settled`,
        toolName: decided.tool.name,
        ...ending,
        durationMs: 0,
        attempt: 0,
        verdict: 'deny',
        decidedBy: decided.decidedBy,
        ...(decided.rule !== undefined ? { rule: decided.rule } : {}),
      }),
    ];
  }
  if (decided.verdict === 'ask') {
    const approval = answer.approval ?? DEFAULT_APPROVAL;
    return [
      journalEvent({
        ...base,
        type: 'suspended',
        id: `${decided.dispatchId}:suspended`,
        approvalKey: approvalKey(decided.tool.name, decided.input),
        inputDigest: decided.inputDigest,
        policyRevision: decided.policyRevision,
        tool: decided.tool,
        input: decided.input,
        agent: decided.agent,
        isolation: decided.isolation,
        ...(decided.profile ? { profile: decided.profile } : {}),
        decidedBy: decided.decidedBy,
        ...(decided.rule !== undefined ? { rule: decided.rule } : {}),
        submittedBy: requested.submittedBy,
        expiresAt: new Date(Date.parse(decided.at) + approval.timeoutMs).toISOString(),
        onTimeout: approval.onTimeout,
        separationOfDuties: answer.separationOfDuties,
      }),
    ];
  }
  return [];
}

/**
 * The run's next dispatch after `failures` calls in a row ended in an error or a denial (the
 * policy's cap is `consecutive`): denied before the chain runs, recorded as the `errorCap` rule.
 */
export function errorCapAnswer(input: unknown, cap: ErrorCapFacts, revision: number): ChainAnswer {
  return {
    decision: {
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: errorCapRule(cap),
      reason: `the run's last ${cap.failures} calls ended in an error or a denial (cap ${cap.consecutive}): it dispatches again after a reset of its error cap`,
      input,
      advisory: [],
    },
    revision,
    separationOfDuties: false,
  };
}

/** A chain that failed to evaluate (bad stored policy, unknown profile): fail closed. */
export function failClosedAnswer(input: unknown, reason: string): ChainAnswer {
  return {
    decision: { verdict: 'deny', decidedBy: 'default', reason, input, advisory: [] },
    revision: 0,
    separationOfDuties: false,
  };
}
