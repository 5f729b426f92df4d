import type { NatsConnection } from '@nats-io/transport-node';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  toWireError,
  ToolgateError,
  type RequestedEvent,
  type Subjects,
} from '@toolgate/contracts';
import type { PolicyRuntime } from '@toolgate/policy-runtime';
import { Attr, annotate } from '@toolgate/telemetry';
import { decidedFor, failClosedAnswer, followUpsFor, type ChainAnswer } from './decision-events';

const encoder = new TextEncoder();

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
  ) {}

  async onRequested(requested: RequestedEvent): Promise<void> {
    let answer: ChainAnswer;
    try {
      // The requested event carries every fact the chain decides on (tool, input, agent, ...).
      answer = await this.runtime.decide(requested.tenant, requested);
    } catch (err) {
      answer = failClosedAnswer(
        requested.input,
        `policy could not be evaluated: ${toWireError(err).message}`,
      );
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
      const result = await this.publisher.append(event);
      if (result.appended && !result.duplicate && event.type === 'suspended') {
        this.nc.publish(
          this.subjects.approvals(event.tenant, 'pending'),
          encoder.encode(JSON.stringify(event)),
        );
      }
    }
  }
}
