import {
  ErrorCode,
  journalEvent,
  normaliseApprovalDecision,
  ToolgateError,
  type ResolvedEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';

/** A resolution as it arrives from any edge (HTTP, NATS, CLI, SDK) or from the timeout sweeper. */
export interface ResolutionCommand {
  /** Any value: it normalises to allow/deny and fails closed. */
  decision: unknown;
  reason?: string;
  /** Who resolves: an identity, or `system:timeout`. */
  by: string;
  source: 'human' | 'timeout' | 'policy';
  /** When given, must match the digest of the input that was asked for. */
  inputDigest?: string;
  /** The approval key the resolver named. */
  approvalKey: string;
  /** From the command's metadata, never read inside the rule. */
  at: Date;
  /** Unique per attempt, so racing attempts are told apart by the broker and never deduplicated. */
  attemptId: string;
}

/**
 * Decides the `resolved` event for a parked call (pure). Refuses a resolution that names another
 * call (approval-mismatch) or, under separation of duties, comes from the identity that submitted
 * the call (forbidden). A timeout applies the suspension's `onTimeout`, whatever value it was given,
 * and so does a person's resolution at or after the suspension's `expiresAt`.
 */
export function decideResolution(
  suspended: SuspendedEvent,
  command: ResolutionCommand,
): ResolvedEvent {
  if (command.approvalKey !== suspended.approvalKey) {
    throw new ToolgateError(
      ErrorCode.ApprovalMismatch,
      'the approval key does not match the parked call',
      {
        details: { dispatchId: suspended.dispatchId },
      },
    );
  }
  if (command.inputDigest !== undefined && command.inputDigest !== suspended.inputDigest) {
    throw new ToolgateError(
      ErrorCode.ApprovalMismatch,
      'the input digest does not match the call that was asked for',
      {
        details: { dispatchId: suspended.dispatchId, expected: suspended.inputDigest },
      },
    );
  }
  if (
    command.source === 'human' &&
    suspended.separationOfDuties &&
    command.by === suspended.submittedBy
  ) {
    throw new ToolgateError(
      ErrorCode.Forbidden,
      'separation of duties: the submitter of a call cannot approve it',
      {
        details: { dispatchId: suspended.dispatchId },
      },
    );
  }
  // The window is the policy's: once it has ended, only its `onTimeout` decides, whoever asks and
  // however late the sweeper is (a person's allow after the window ran a call the policy denied).
  const late =
    command.source === 'human' && command.at.getTime() >= Date.parse(suspended.expiresAt);
  const source = late ? 'timeout' : command.source;
  const decision =
    source === 'timeout' ? suspended.onTimeout : normaliseApprovalDecision(command.decision);
  const reason = late
    ? `approval window ended at ${suspended.expiresAt}; ${suspended.onTimeout} applied by policy (asked by ${command.by})`
    : (command.reason ??
      (source === 'timeout'
        ? `approval timed out; ${suspended.onTimeout} applied by policy`
        : undefined));
  return journalEvent({
    type: 'resolved',
    id: `${suspended.dispatchId}:resolved:${command.attemptId}`,
    tenant: suspended.tenant,
    runId: suspended.runId,
    dispatchId: suspended.dispatchId,
    at: command.at.toISOString(),
    causationId: suspended.id,
    approvalKey: suspended.approvalKey,
    inputDigest: suspended.inputDigest,
    policyRevision: suspended.policyRevision,
    decision,
    ...(reason ? { reason } : {}),
    by: late ? 'system:timeout' : command.by,
    source,
  });
}
