import type { INestApplication } from '@nestjs/common';
import { JournalPublisher, type PoisonReport } from '@toolgate/bus';
import { ErrorCode, journalEvent, parseJournalSubject } from '@toolgate/contracts';

/**
 * Settles the dispatch of a dead-lettered event as an error (`poison-message`), so the caller gets
 * an answer instead of waiting forever and the message never loops. A dispatch that is already
 * settled stays as it is (the settlement is once per dispatch at the broker).
 */
export async function settlePoisonedDispatch(
  publisher: JournalPublisher,
  report: PoisonReport,
): Promise<void> {
  const event = report.event;
  // A payload that is not an event still names its dispatch in its subject:
  // <prefix>.journal[.<partition>].<tenant>.<runId>.<dispatchId>.<type>
  const tokens = parseJournalSubject(report.subject);
  const where = event ?? {
    tenant: tokens?.tenant,
    runId: tokens?.runId,
    dispatchId: tokens?.key,
    type: tokens?.type,
    id: null,
  };
  if (
    !where.tenant ||
    !where.runId ||
    !where.dispatchId ||
    !where.type ||
    where.type.startsWith('worktree-')
  )
    return;
  const toolName =
    (event && 'tool' in event && event.tool
      ? event.tool.name
      : event && 'toolName' in event
        ? event.toolName
        : undefined) ?? 'unknown';
  // Kept out by forgeries, the append throws: the message is not terminated, and its next
  // delivery is dead-lettered (deduplicated) and settled again.
  await publisher.append(
    journalEvent({
      type: 'settled',
      id: `${where.dispatchId}:settled`,
      tenant: where.tenant,
      runId: where.runId,
      dispatchId: where.dispatchId,
      at: new Date().toISOString(),
      causationId: where.id,
      toolName,
      outcome: 'error',
      error: {
        code: ErrorCode.PoisonMessage,
        message: report.error.message,
        details: { consumer: report.consumer, seq: report.seq },
      },
      durationMs: 0,
      attempt: report.deliveryCount,
    }),
  );
}

/**
 * {@link settlePoisonedDispatch} through the service's own journal publisher (`BusModule`'s): a
 * transport `onPoison` hook.
 */
export function settlePoisoned(app: INestApplication, report: PoisonReport): Promise<void> {
  return settlePoisonedDispatch(app.get(JournalPublisher), report);
}
