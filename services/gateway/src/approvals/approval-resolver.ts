import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { decideResolution, publishResolution } from '@toolgate/approvals';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  GetApprovalRequestSchema,
  ResolveApprovalRequestSchema,
  ToolgateError,
  type ApprovalDetail,
  type ApprovalMatch,
  type ListApprovalsResponse,
  type ResolvedEvent,
  type Subjects,
} from '@toolgate/contracts';
import type { Principal } from '../auth/token-auth';
import type { JournalQueries } from '../api/journal-queries';
import { parseRequest } from '../api/parse-request';
import { approvalDetail } from './approval-detail';

/** How long a lookup by key waits for the projection to show a just-parked call. */
const LOCATE_GRACE_MS = 2000;

/** Where a parked call lives, as the journal's projection knows it. */
interface ApprovalLocation {
  dispatchId: string;
  runId: string;
}

/** What names a parked call: its key, and the dispatch (or run) when the key alone is ambiguous. */
interface ApprovalRef {
  key: string;
  dispatchId?: string | undefined;
  runId?: string | undefined;
}

/** How many approvals of one key a lookup reads: enough to list every match of a conflict. */
const KEY_MATCHES_LIMIT = 100;

/**
 * Reads and resolves approvals for a tenant's approvers. The parked call is read from the journal
 * stream (the source of truth); a resolution is decided by the pure decider and published with the
 * broker's first-closing-wins guarantee. A key alone names identical calls (the same tool and input
 * in two runs), so a key that matches more than one pending approval is refused with `conflict`
 * listing them: an approval covers exactly one call, and the caller names it by dispatch.
 */
export class ApprovalResolver {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly queries: JournalQueries,
    private readonly now: () => Date,
  ) {}

  /** One parked call with what an approver needs to decide it (its events read from the stream). */
  async get(principal: Principal, body: unknown): Promise<ApprovalDetail> {
    const req = parseRequest(GetApprovalRequestSchema, body);
    const { runId, dispatchId } = await this.locate(principal.tenant, req);
    const last = <T extends 'requested' | 'suspended' | 'decided' | 'resolved' | 'settled'>(
      type: T,
    ) => this.publisher.last(principal.tenant, runId, dispatchId, type);
    const [requested, suspended, decided, resolved, settled] = await Promise.all([
      last('requested'),
      last('suspended'),
      last('decided'),
      last('resolved'),
      last('settled'),
    ]);
    if (!suspended || suspended.event.approvalKey !== req.key) throw notFound(req.key);
    return approvalDetail({
      suspended: suspended.event,
      requested: requested?.event ?? null,
      decided: decided?.event ?? null,
      resolved: resolved?.event ?? null,
      settled: settled?.event ?? null,
    });
  }

  async resolve(principal: Principal, body: unknown): Promise<{ resolved: ResolvedEvent }> {
    const req = parseRequest(ResolveApprovalRequestSchema, body);
    const location = await this.locate(principal.tenant, req);
    const suspended = await this.publisher.last(
      principal.tenant,
      location.runId,
      location.dispatchId,
      'suspended',
    );
    if (!suspended) throw notFound(req.key);
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

  /**
   * Where the call a reference names is parked. With the dispatch and its run named, the journal
   * stream is read directly; otherwise the projection knows, and may lag a suspension by a moment,
   * so a lookup that finds nothing looks again for a short while. By key (and run), exactly one
   * pending approval must match — more is `conflict` — or, with none pending, the most recently
   * resolved one answers (so a late resolution hears who won).
   */
  private async locate(tenant: string, ref: ApprovalRef): Promise<ApprovalLocation> {
    if (ref.dispatchId && ref.runId) return { dispatchId: ref.dispatchId, runId: ref.runId };
    const deadline = Date.now() + LOCATE_GRACE_MS;
    for (;;) {
      const found = ref.dispatchId
        ? await this.queries.ask<ApprovalLocation | null>('approvals.get', tenant, {
            key: ref.key,
            dispatchId: ref.dispatchId,
          })
        : await this.byKey(tenant, ref.key, ref.runId);
      if (found) return found;
      if (Date.now() > deadline) throw notFound(ref.key);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  private async byKey(
    tenant: string,
    key: string,
    runId: string | undefined,
  ): Promise<ApprovalLocation | null> {
    const { approvals } = await this.queries.ask<ListApprovalsResponse>('approvals.list', tenant, {
      key,
      ...(runId ? { runId } : {}),
      status: 'all',
      order: 'newest',
      limit: KEY_MATCHES_LIMIT,
    });
    const pending = approvals.filter((a) => a.status === 'pending');
    if (pending.length > 1) {
      const matches: ApprovalMatch[] = pending
        .map((a) => ({
          dispatchId: a.dispatchId,
          runId: a.runId,
          toolName: a.toolName,
          agent: a.agent,
          suspendedAt: a.suspendedAt,
        }))
        .reverse(); // oldest first, as the pending queue reads
      throw new ToolgateError(
        ErrorCode.Conflict,
        `approval key ${key} matches ${pending.length} pending calls${
          pending.length === KEY_MATCHES_LIMIT ? ' or more' : ''
        }: name one by its dispatchId`,
        { details: { key, matches } },
      );
    }
    return pending[0] ?? approvals[0] ?? null;
  }
}

function notFound(key: string): ToolgateError {
  return new ToolgateError(ErrorCode.NotFound, 'no such approval', { details: { key } });
}
