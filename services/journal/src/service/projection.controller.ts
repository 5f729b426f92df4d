import { Controller, Inject } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import type { BatchEntry } from '@toolgate/bus';
import { applyEvent } from '../projection/apply-event';
import { JOURNAL_DB, type JournalDbHandle } from './journal-db.provider';

/**
 * Folds every journal event into the projection, exactly once per stream sequence. Events come in
 * runs (one under light load, many when the stream is ahead) and a run is applied in one
 * transaction: the commit, not the fold, is what costs, so batching is what lets the projection
 * keep up with the dispatch rate.
 */
@Controller()
export class ProjectionController {
  constructor(@Inject(JOURNAL_DB) private readonly handle: JournalDbHandle) {}

  @EventPattern('*')
  async onEvents(@Payload() entries: BatchEntry[]): Promise<void> {
    await this.handle.db.transaction().execute(async (trx) => {
      for (const entry of entries) await applyEvent(trx, entry);
    });
  }
}
