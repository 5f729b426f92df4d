import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { JournalPublisher, type PoisonReport } from '@toolgate/bus';
import { ErrorCode, journalEvent, type Subjects } from '@toolgate/contracts';

/**
 * Settles the dispatch of a dead-lettered event as an error (`poison-message`), so the caller gets
 * an answer instead of waiting forever and the message never loops. A dispatch that is already
 * settled stays as it is (the settlement is once per dispatch at the broker).
 */
export async function settlePoisonedDispatch(nc: NatsConnection, subjects: Subjects, report: PoisonReport): Promise<void> {
  const event = report.event;
  if (!event || event.type.startsWith('worktree-')) return;
  const toolName = 'tool' in event && event.tool ? event.tool.name : 'toolName' in event ? event.toolName : undefined;
  if (!toolName) return;
  const publisher = new JournalPublisher(jetstream(nc), subjects);
  await publisher.append(
    journalEvent({
      type: 'settled',
      id: `${event.dispatchId}:settled`,
      tenant: event.tenant,
      runId: event.runId,
      dispatchId: event.dispatchId,
      at: new Date().toISOString(),
      causationId: event.id,
      toolName,
      outcome: 'error',
      error: { code: ErrorCode.PoisonMessage, message: report.error.message, details: { consumer: report.consumer, seq: report.seq } },
      durationMs: 0,
      attempt: report.deliveryCount,
    }),
  );
}
