import { Controller, Inject } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import type { BatchEntry } from '@toolgate/bus';
import { applyEvents } from '../projection/apply-event';
import { measureDispatch, type DispatchMeasurement } from '../projection/dispatch-measurements';
import { JournalMetrics } from './journal-metrics';
import { JOURNAL_DB, type JournalDbHandle } from './journal-db.provider';

/**
 * Folds every journal event into the projection, exactly once per stream sequence. Events come in
 * runs (one under light load, many when the stream is ahead) and a run is applied in one
 * transaction: the commit, not the fold, is what costs, so batching is what lets the projection
 * keep up with the dispatch rate. Within a run, each row is loaded and saved once (`applyEvents`).
 * What the run changed is measured for `/metrics` once the transaction has committed: a rolled
 * back run is applied again later and measured then.
 */
@Controller()
export class ProjectionController {
  constructor(
    @Inject(JOURNAL_DB) private readonly handle: JournalDbHandle,
    @Inject(JournalMetrics) private readonly metrics: JournalMetrics,
  ) {}

  @EventPattern('*')
  async onEvents(@Payload() entries: BatchEntry[]): Promise<void> {
    const measured: DispatchMeasurement[] = [];
    await this.handle.db
      .transaction()
      .execute((trx) =>
        applyEvents(trx, entries, (before, after) =>
          measured.push(...measureDispatch(before, after)),
        ),
      );
    this.metrics.record(measured, entries.length);
  }
}
