import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { decideResolution, publishResolution } from '@toolgate/approvals';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  ResolveApprovalRequestSchema,
  ToolgateError,
  type ResolvedEvent,
  type Subjects,
} from '@toolgate/contracts';
import type { Principal } from '../auth/token-auth';
import type { JournalQueries } from '../api/journal-queries';
import { parseRequest } from '../api/parse-request';

/** Where a pending approval lives, as the journal's projection knows it. */
interface ApprovalLocation {
  dispatchId: string;
  runId: string;
  status: 'pending' | 'resolved';
}

/**
 * Resolves approvals for a tenant's approvers. The parked call is read from the journal stream (the
 * source of truth), the resolution is decided by the pure decider and published with the broker's
 * first-closing-wins guarantee.
 */
export class ApprovalResolver {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly queries: JournalQueries,
    private readonly now: () => Date,
  ) {}

  async resolve(principal: Principal, body: unknown): Promise<{ resolved: ResolvedEvent }> {
    const req = parseRequest(ResolveApprovalRequestSchema, body);
    const location = await this.queries.ask<ApprovalLocation | null>('approvals.get', principal.tenant, {
      key: req.key,
      ...(req.dispatchId ? { dispatchId: req.dispatchId } : {}),
    });
    if (!location) {
      throw new ToolgateError(ErrorCode.NotFound, 'no such approval', { details: { key: req.key } });
    }
    const suspended = await this.publisher.last(principal.tenant, location.runId, location.dispatchId, 'suspended');
    if (!suspended) throw new ToolgateError(ErrorCode.NotFound, 'no such approval', { details: { key: req.key } });
    const resolved = decideResolution(suspended.event, {
      decision: req.decision,
      ...(req.reason ? { reason: req.reason } : {}),
      by: principal.identity,
      source: 'human',
      ...(req.inputDigest ? { inputDigest: req.inputDigest } : {}),
      approvalKey: req.key,
      at: this.now(),
      attemptId: randomUUID(),
    });
    return { resolved: await publishResolution(this.publisher, this.nc, this.subjects, resolved) };
  }
}
