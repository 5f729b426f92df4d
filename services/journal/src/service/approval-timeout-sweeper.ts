import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Kysely } from 'kysely';
import { decideResolution, publishResolution } from '@toolgate/approvals';
import type { JournalPublisher } from '@toolgate/bus';
import { hasErrorCode, ErrorCode, type Subjects } from '@toolgate/contracts';
import type { Database } from '../db/database';
import { dueApprovals } from '../queries/approval-queries';

/**
 * Resolves expired approvals with their policy's timeout decision. Safe in every journal replica at
 * once: a resolution is a conditional publish, so a sweeper racing another sweeper or a person loses
 * cleanly (`already-resolved`) and exactly one decision applies.
 */
export class ApprovalTimeoutSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly now: () => Date,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .then(() => undefined, this.onError)
        .finally(() => (this.running = undefined));
    }, intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** One pass: resolves every due approval; returns how many this sweeper won. */
  async sweep(): Promise<number> {
    const now = this.now();
    let won = 0;
    // A resolution that could not be recorded now (forgeries kept it out, the broker is down) is
    // tried again by the next pass — after this one has tried the others.
    let later: unknown;
    for (const due of await dueApprovals(this.db, now)) {
      const suspended = await this.publisher.last(
        due.tenant,
        due.runId,
        due.dispatchId,
        'suspended',
      );
      if (!suspended) continue;
      const resolved = decideResolution(suspended.event, {
        decision: suspended.event.onTimeout,
        by: 'system:timeout',
        source: 'timeout',
        approvalKey: suspended.event.approvalKey,
        at: now,
        attemptId: randomUUID(),
      });
      try {
        await publishResolution(this.publisher, this.nc, this.subjects, resolved, suspended);
        won++;
      } catch (err) {
        if (hasErrorCode(err, ErrorCode.AlreadyResolved)) continue;
        if (!hasErrorCode(err, ErrorCode.Unavailable)) throw err;
        later ??= err;
      }
    }
    if (later) throw later;
    return won;
  }
}
