import type { NatsConnection } from '@nats-io/transport-node';
import type { JournalPublisher } from '@toolgate/bus';
import { ErrorCode, ToolgateError, type ResolvedEvent, type Subjects } from '@toolgate/contracts';

const encoder = new TextEncoder();

/**
 * Publishes a resolution. First closing wins at the broker (`resolved` is once per dispatch); a
 * loser gets `already-resolved` naming the winning decision. The winner also notifies listeners on
 * the tenant's core-NATS approvals subject.
 */
export async function publishResolution(
  publisher: JournalPublisher,
  nc: NatsConnection,
  subjects: Subjects,
  resolved: ResolvedEvent,
): Promise<ResolvedEvent> {
  const result = await publisher.append(resolved);
  if (!result.appended) {
    const winner = await publisher.last(
      resolved.tenant,
      resolved.runId,
      resolved.dispatchId,
      'resolved',
    );
    throw new ToolgateError(
      ErrorCode.AlreadyResolved,
      `already resolved: ${winner?.event.decision ?? 'unknown'}`,
      {
        details: winner
          ? {
              decision: winner.event.decision,
              by: winner.event.by,
              source: winner.event.source,
              at: winner.event.at,
              dispatchId: resolved.dispatchId,
            }
          : { dispatchId: resolved.dispatchId },
      },
    );
  }
  nc.publish(
    subjects.approvals(resolved.tenant, 'resolved'),
    encoder.encode(JSON.stringify(resolved)),
  );
  return resolved;
}
