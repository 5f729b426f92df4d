import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { JournalEvent } from '@toolgate/contracts';
import type { JetStreamEventContext } from '@toolgate/service-kit';
import { applyEvent } from '../projection/apply-event';
import { JOURNAL_DB, type JournalDbHandle } from './journal-db.provider';

/** Folds every journal event into the projection, exactly once per stream sequence. */
@Controller()
export class ProjectionController {
  constructor(@Inject(JOURNAL_DB) private readonly handle: JournalDbHandle) {}

  @EventPattern('*')
  async onEvent(
    @Payload() event: JournalEvent,
    @Ctx() delivery: JetStreamEventContext,
  ): Promise<void> {
    await applyEvent(this.handle.db, {
      event,
      seq: delivery.seq,
      stream: delivery.msg.info.stream,
    });
  }
}
