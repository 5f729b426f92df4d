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

/** How long a resolution by key waits for the projection to show a just-parked call. */
const LOCATE_GRACE_MS = 2000;

/** Where a pending approval lives, as the journal's projection knows it. */
interface ApprovalLocation {
  dispatchId: string;
  runId: string;
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
    // With the dispatch named, the journal stream (the source of truth) is read directly; by key
    // alone the projection knows where it is parked, and may lag the suspension by a moment.
    const location =
      req.dispatchId && req.runId
        ? { dispatchId: req.dispatchId, runId: req.runId }
        : await this.locate(principal.tenant, req.key, req.dispatchId);
    if (!location) {
      throw new ToolgateError(ErrorCode.NotFound, 'no such approval', {
        details: { key: req.key },
      });
    }
    const suspended = await this.publisher.last(
      principal.tenant,
      location.runId,
      location.dispatchId,
      'suspended',
    );
    if (!suspended)
      throw new ToolgateError(ErrorCode.NotFound, 'no such approval', {
        details: { key: req.key },
      });
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
    return {
      resolved: await publishResolution(
        this.publisher,
        this.nc,
        this.subjects,
        resolved,
        suspended,
      ),
    };
  }

  /** Finds a parked call by key, giving the projection a moment to fold a fresh suspension. */
  private async locate(
    tenant: string,
    key: string,
    dispatchId: string | undefined,
  ): Promise<ApprovalLocation | null> {
    const deadline = Date.now() + LOCATE_GRACE_MS;
    for (;;) {
      const found = await this.queries.ask<ApprovalLocation | null>('approvals.get', tenant, {
        key,
        ...(dispatchId ? { dispatchId } : {}),
      });
      if (found || Date.now() > deadline) return found;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
