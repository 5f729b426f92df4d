import type { NatsConnection } from '@nats-io/transport-node';
import { serveRequests, metricsFor, type ServedEndpoints } from '@toolgate/service-kit';
import { z } from 'zod';
import {
  ErrorCode,
  GetDispatchValueRequestSchema,
  GetRunRequestSchema,
  ListApprovalsRequestSchema,
  QueryOperation,
  SUBJECT_TOKEN_PATTERN,
  requestSigningOf,
  type ServiceKeys,
  ToolgateError,
  type Subjects,
} from '@toolgate/contracts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database';
import { getApproval, getApprovalForDispatch, listApprovals } from '../queries/approval-queries';
import { getDispatch, getDispatchValue } from '../queries/dispatch-queries';
import { getRun } from '../queries/run-queries';

const Token = z.string().regex(SUBJECT_TOKEN_PATTERN);
const Tenant = z.object({ tenant: Token });

// Each query's request schema, built once: a zod schema compiles its parser on first use, so one
// built per request paid that compilation on every query.
const GetDispatchQuery = Tenant.extend({ dispatchId: Token });
const GetDispatchValueQuery = GetDispatchValueRequestSchema.extend({ tenant: Token });
const GetRunQuery = GetRunRequestSchema.extend({ tenant: Token });
const ListApprovalsQuery = ListApprovalsRequestSchema.extend({ tenant: Token });
const GetApprovalQuery = Tenant.extend({ key: z.string(), dispatchId: Token.optional() });

/** One query: its request schema and how to answer it from the projection. */
type Answer = (db: Kysely<Database>, body: unknown, now: () => Date) => Promise<unknown>;

const queries: Record<QueryOperation, Answer> = {
  [QueryOperation.GetDispatch]: async (db, body) => {
    const req = GetDispatchQuery.parse(body);
    const found = await getDispatch(db, req.tenant, req.dispatchId);
    if (!found)
      throw new ToolgateError(ErrorCode.NotFound, 'no such dispatch', {
        details: { dispatchId: req.dispatchId },
      });
    return found;
  },
  [QueryOperation.GetDispatchValue]: async (db, body) => {
    const req = GetDispatchValueQuery.parse(body);
    const found = await getDispatchValue(db, req.tenant, req.dispatchId, req.part, req.offset);
    if (!found)
      throw new ToolgateError(ErrorCode.NotFound, 'no such dispatch', {
        details: { dispatchId: req.dispatchId },
      });
    return found;
  },
  [QueryOperation.GetRun]: async (db, body) => {
    const req = GetRunQuery.parse(body);
    const found = await getRun(db, req.tenant, req.runId, { cursor: req.cursor, limit: req.limit });
    if (!found)
      throw new ToolgateError(ErrorCode.NotFound, 'no such run', {
        details: { runId: req.runId },
      });
    return found;
  },
  [QueryOperation.ListApprovals]: async (db, body, now) => {
    const req = ListApprovalsQuery.parse(body);
    return listApprovals(db, req, now());
  },
  [QueryOperation.GetApproval]: async (db, body) => {
    const req = GetApprovalQuery.parse(body);
    const found = req.dispatchId
      ? await getApprovalForDispatch(db, req.tenant, req.dispatchId)
      : await getApproval(db, req.tenant, req.key);
    if (!found || found.approvalKey !== req.key) return null;
    return found;
  },
};

/**
 * Answers the gateway's read queries from the projection over NATS request/reply, in a queue group
 * shared by journal replicas. Only a query signed by the gateway is answered (`requestSigningOf`;
 * anything else is `unauthorized` before its body is read), so the tenant in it is the one the
 * gateway took from the caller's token; every query filters on it. A body that does not match its query's schema is refused as
 * `invalid-request`; `now` is the clock the approvals listing measures ages against.
 */
export function serveQueries(
  nc: NatsConnection,
  subjects: Subjects,
  db: Kysely<Database>,
  now: () => Date,
  keys: ServiceKeys,
): ServedEndpoints {
  const metrics = metricsFor(nc);
  return serveRequests(
    nc,
    `${subjects.prefix}-journal`,
    Object.entries(queries).map(([operation, answer]) => {
      const subject = subjects.query(operation as QueryOperation);
      return {
        subject,
        signedBy: requestSigningOf(subjects, subject).requesters,
        handle: (body) => answer(db, body, now),
      };
    }),
    {
      keys,
      onUntrusted: metrics.untrustedCounter('request'),
    },
  );
}
