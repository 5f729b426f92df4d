import type { NatsConnection } from '@nats-io/transport-node';
import { isCapped, type ErrorStreaks, type JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  toWireError,
  ToolgateError,
  type RequestedEvent,
  type Subjects,
} from '@toolgate/contracts';
import type { PolicyRuntime } from '@toolgate/policy-runtime';
import { Attr, annotate } from '@toolgate/telemetry';
import {
  decidedFor,
  errorCapAnswer,
  failClosedAnswer,
  followUpsFor,
  type ChainAnswer,
} from './decision-events';

/**
 * Consumes `requested`: decides the call through the tenant's chain and journals `decided`, then
 * `settled` (deny) or `suspended` (ask). Redelivery is safe: `decided` is once per dispatch at the
 * broker, so a second evaluation finds the first decision and only completes its follow-ups.
 */
export class Evaluator {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly runtime: PolicyRuntime,
    private readonly now: () => Date,
    private readonly streaks?: ErrorStreaks,
  ) {}

  async onRequested(requested: RequestedEvent): Promise<void> {
    let answer: ChainAnswer;
    const capped = await this.errorCapReached(requested);
    if (capped) {
      answer = capped;
    } else {
      try {
        // The requested event carries every fact the chain decides on (tool, input, agent, ...).
        answer = await this.runtime.decide(requested.tenant, requested);
      } catch (err) {
        answer = failClosedAnswer(
          requested.input,
          `policy could not be evaluated: ${toWireError(err).message}`,
        );
      }
    }
    annotate({
      [Attr.Verdict]: answer.decision.verdict,
      [Attr.DecidedBy]: answer.decision.decidedBy,
      [Attr.PolicyRevision]: answer.revision,
      [Attr.Tool]: requested.tool.name,
      [Attr.Rule]: answer.decision.rule ? JSON.stringify(answer.decision.rule) : undefined,
      [Attr.Risk]: requested.tool.risk,
    });
    const at = this.now();
    let decided = decidedFor(requested, answer, at);
    const appended = await this.publisher.append(decided);
    if (!appended.appended || appended.duplicate) {
      // Decided before (a redelivery after a crash): complete that decision's follow-ups, not ours.
      // Within the broker's dedupe window the repeated `decided` id comes back as a duplicate
      // rather than a refusal; either way the journal holds the first decision, not this one.
      // Refused with nothing recorded (on an open broker, forgeries that kept taking the
      // transition, see `SUPERSEDE_ATTEMPTS`): thrown below, so the delivery is retried and, at its
      // last, dead-lettered and settled as an error.
      const recorded = await this.publisher.last(
        requested.tenant,
        requested.runId,
        requested.dispatchId,
        'decided',
      );
      if (!recorded)
        throw new ToolgateError(ErrorCode.Internal, 'decided refused but not found', {
          details: { dispatchId: requested.dispatchId },
        });
      decided = recorded.event;
    }
    for (const event of followUpsFor(
      requested,
      decided,
      { separationOfDuties: answer.separationOfDuties, approval: answer.decision.approval },
      at,
    )) {
      if (event.type === 'settled' && event.outcome === 'denied') {
        // A denial extends the run's error streak before the caller can see it.
        await this.streaks?.record(event.tenant, event.runId, event.dispatchId, 'denied');
      }
      // Not appended: recorded before (a redelivery). Kept out by forgeries on an open broker
      // (`SUPERSEDE_ATTEMPTS`), the append throws: the delivery is retried (its redelivery finds
      // the decision and completes these follow-ups) and, at its last, dead-lettered and settled
      // as an error — never acked unsettled.
      const result = await this.publisher.append(event);
      if (result.appended && !result.duplicate && event.type === 'suspended') {
        this.nc.publish(
          this.subjects.approvals(event.tenant, 'pending'),
          Buffer.from(JSON.stringify(event)),
        );
      }
    }
  }

  /**
   * The answer for a run whose last calls all ended in an error or a denial, up to the policy's
   * cap (read from the journal, so every replica and restart agrees); null when it may dispatch.
   */
  private async errorCapReached(requested: RequestedEvent): Promise<ChainAnswer | null> {
    if (!this.streaks) return null;
    const consecutive = this.runtime.errorCap(requested.tenant);
    if (consecutive === null) return null;
    const streak = await this.streaks.current(requested.tenant, requested.runId);
    if (!isCapped(streak, consecutive)) return null;
    let revision = 0;
    try {
      revision = this.runtime.chainFor(requested.tenant, requested.profile).revision;
    } catch {
      // A policy that does not compile: the refusal stands, recorded under revision 0.
    }
    return errorCapAnswer(requested.input, { failures: streak.failures, consecutive }, revision);
  }
}
