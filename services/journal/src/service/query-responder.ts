import type { NatsConnection } from '@nats-io/transport-node';
import { serveRequests, type ServedEndpoints } from '@toolgate/service-kit';
import { z } from 'zod';
import {
  ErrorCode,
  ListApprovalsRequestSchema,
  QueryOperation,
  SUBJECT_TOKEN_PATTERN,
  ToolgateError,
  type Subjects,
} from '@toolgate/contracts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database';
import { getApproval, getApprovalForDispatch, listApprovals } from '../queries/approval-queries';
import { getDispatch } from '../queries/dispatch-queries';
import { getRun } from '../queries/run-queries';

const Token = z.string().regex(SUBJECT_TOKEN_PATTERN);
const Tenant = z.object({ tenant: Token });

/** One query: its request schema and how to answer it from the projection. */
const queries = {
  [QueryOperation.GetDispatch]: async (db: Kysely<Database>, body: unknown) => {
    const req = Tenant.extend({ dispatchId: Token }).parse(body);
    const found = await getDispatch(db, req.tenant, req.dispatchId);
    if (!found)
      throw new ToolgateError(ErrorCode.NotFound, 'no such dispatch', {
        details: { dispatchId: req.dispatchId },
      });
    return found;
  },
  [QueryOperation.GetRun]: async (db: Kysely<Database>, body: unknown) => {
    const req = Tenant.extend({ runId: Token }).parse(body);
    return getRun(db, req.tenant, req.runId);
  },
  [QueryOperation.ListApprovals]: async (db: Kysely<Database>, body: unknown) => {
    const req = ListApprovalsRequestSchema.extend({ tenant: Token }).parse(body);
    return { approvals: await listApprovals(db, { ...req }, new Date()) };
  },
  [QueryOperation.GetApproval]: async (db: Kysely<Database>, body: unknown) => {
    const req = Tenant.extend({ key: z.string(), dispatchId: Token.optional() }).parse(body);
    const found = req.dispatchId
      ? await getApprovalForDispatch(db, req.tenant, req.dispatchId)
      : await getApproval(db, req.tenant, req.key);
    if (!found || found.approvalKey !== req.key) return null;
    return found;
  },
} as const;

/**
 * Answers the gateway's read queries from the projection over NATS request/reply, in a queue group
 * shared by journal replicas. The tenant in each query comes from the gateway (from the caller's
 * token); every query filters on it.
 */
export function serveQueries(
  nc: NatsConnection,
  subjects: Subjects,
  db: Kysely<Database>,
): ServedEndpoints {
  return serveRequests(
    nc,
    `${subjects.prefix}-journal`,
    Object.entries(queries).map(([operation, answer]) => ({
      subject: subjects.query(operation as QueryOperation),
      handle: (body) => answer(db, body),
    })),
  );
}
