import type { NatsConnection } from '@nats-io/transport-node';
import type { JournalPublisher, StoredEvent } from '@toolgate/bus';
import {
  ErrorCode,
  ToolgateError,
  type ResolvedEvent,
  type Subjects,
  type SuspendedEvent,
} from '@toolgate/contracts';
import { Attr, resumedSpan } from '@toolgate/telemetry';

const encoder = new TextEncoder();

/**
 * Publishes a resolution. First closing wins at the broker (`resolved` is once per dispatch); a
 * loser gets `already-resolved` naming the winning decision. The winner also notifies listeners on
 * the tenant's core-NATS approvals subject.
 *
 * The parked call's trace resumes here: an `approval wait` span from the suspension (`suspended`,
 * read back with its headers) to this resolution, a child of the span that parked the call and
 * linked to whatever resolves it (an approver's request, the timeout sweep). `resolved` is
 * published inside it, so its execution and settlement stay in the dispatch's one trace.
 */
export async function publishResolution(
  publisher: JournalPublisher,
  nc: NatsConnection,
  subjects: Subjects,
  resolved: ResolvedEvent,
  suspended: Pick<StoredEvent<SuspendedEvent>, 'event' | 'headers'>,
): Promise<ResolvedEvent> {
  return resumedSpan(
    'approval wait',
    suspended.headers,
    new Date(suspended.event.at),
    {
      [Attr.Tenant]: resolved.tenant,
      [Attr.RunId]: resolved.runId,
      [Attr.DispatchId]: resolved.dispatchId,
      [Attr.Tool]: suspended.event.tool.name,
      [Attr.ApprovalDecision]: resolved.decision,
      [Attr.ApprovalSource]: resolved.source,
    },
    () => publish(publisher, nc, subjects, resolved),
  );
}

async function publish(
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
