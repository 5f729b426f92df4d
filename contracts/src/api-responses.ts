import { z } from 'zod';
import {
  type ApprovalDetail,
  type ApprovalListItem,
  type ApprovalView,
  type ImportMcpToolsResponse,
  type ListApprovalsResponse,
  ScopeSchema,
  type WhoAmIResponse,
} from './api';
import {
  AgentRefSchema,
  DecidedBySchema,
  IsolationSchema,
  JournalEventSchema,
  ResolvedEventSchema,
  TaintSchema,
  ToolRefSchema,
  VerdictSchema,
  WireErrorSchema,
} from './events';
import type { InputPreview } from './list-paging';
import { PolicyDocumentWireSchema } from './policy-document-wire';

/**
 * Schemas of what the gateway's API answers, for the operations whose answers are written as
 * TypeScript interfaces elsewhere (the journal's read models, the approval detail): the OpenAPI
 * document and generated clients are built from these. Each is checked against its interface at
 * compile time (`satisfies z.ZodType<…>`), so the two cannot drift apart. Objects are open
 * (`looseObject`): a field added later is not a breaking change for a client.
 */

const Iso = z.string().describe('ISO 8601 date-time');
const nullable = <T extends z.ZodType>(s: T) => s.nullable();

export const InputPreviewSchema = z.looseObject({
  json: z.string(),
  truncated: z.boolean(),
  bytes: z.number().int(),
  summary: z.string().nullable(),
}) satisfies z.ZodType<InputPreview>;

const ApprovalOutcomeSchema = z.looseObject({
  outcome: z.enum(['ok', 'error', 'denied']),
  errorCode: z.string().nullable(),
  at: Iso,
});

const approvalViewShape = {
  tenant: z.string(),
  runId: z.string(),
  dispatchId: z.string(),
  approvalKey: z.string(),
  inputDigest: z.string(),
  policyRevision: z.number().int(),
  status: z.enum(['pending', 'resolved']),
  toolName: nullable(z.string()),
  tool: nullable(ToolRefSchema),
  agent: nullable(AgentRefSchema),
  isolation: nullable(IsolationSchema),
  profile: nullable(z.string()),
  decidedBy: nullable(DecidedBySchema),
  rule: z.unknown().optional(),
  submittedBy: nullable(z.string()),
  onTimeout: nullable(z.enum(['allow', 'deny'])),
  separationOfDuties: nullable(z.boolean()),
  suspendedAt: nullable(Iso),
  expiresAt: nullable(Iso),
  decision: nullable(z.enum(['allow', 'deny'])),
  reason: nullable(z.string()),
  resolvedBy: nullable(z.string()),
  source: nullable(z.enum(['human', 'timeout', 'policy'])),
  resolvedAt: nullable(Iso),
  updatedAt: Iso,
  settled: ApprovalOutcomeSchema.nullable().optional(),
};

/** An approval with its whole (post-hook) input. */
export const ApprovalViewSchema = z.looseObject({
  ...approvalViewShape,
  input: z.unknown(),
}) satisfies z.ZodType<ApprovalView>;

/** An approval as a list carries it: a bounded preview instead of the input. */
export const ApprovalListItemSchema = z.looseObject({
  ...approvalViewShape,
  inputPreview: InputPreviewSchema,
}) satisfies z.ZodType<ApprovalListItem>;

/** One page of `approvals.list` (`GET /v1/approvals`). */
export const ListApprovalsResponseSchema = z.looseObject({
  approvals: z.array(ApprovalListItemSchema),
  nextCursor: z.string().nullable(),
}) satisfies z.ZodType<ListApprovalsResponse>;

/** One approval with what an approver needs (`GET /v1/approvals/{key}`). */
export const ApprovalDetailSchema = z.looseObject({
  approval: ApprovalViewSchema,
  askReason: z.string().nullable(),
  risk: z.string(),
  shell: z
    .looseObject({
      command: z.string(),
      scope: z.enum(['segments', 'call']),
      segments: z.array(
        z.looseObject({
          argv: z.array(z.string()),
          asked: z.boolean(),
          why: z.string().nullable(),
          unmatchable: z.string().nullable(),
        }),
      ),
    })
    .nullable(),
  elided: z.array(z.literal('effectiveInput')),
  shellElided: z.boolean(),
}) satisfies z.ZodType<ApprovalDetail>;

/** What resolving an approval answers: the journaled `resolved` event. */
export const ResolveApprovalResponseSchema = z.looseObject({ resolved: ResolvedEventSchema });

/** `GET /v1/whoami`. */
export const WhoAmIResponseSchema = z.looseObject({
  tenant: z.string(),
  identity: z.string(),
  scopes: z.array(ScopeSchema),
  traceUrlTemplate: z.string().nullable(),
}) satisfies z.ZodType<WhoAmIResponse>;

/** `POST /v1/mcp/servers/{name}/import`. */
export const ImportMcpToolsResponseSchema = z.looseObject({
  server: z.string(),
  imported: z.array(
    z.looseObject({
      name: z.string(),
      tool: z.string(),
      contractHash: z.string(),
      definitionHash: z.string(),
    }),
  ),
  skipped: z.array(z.looseObject({ tool: z.string(), reason: z.string() })),
  toolsetHash: z.string(),
}) satisfies z.ZodType<ImportMcpToolsResponse>;

/** The states a dispatch's journal fold passes through. */
export const DispatchStatusSchema = z.enum([
  'requested',
  'decided',
  'suspended',
  'resolved',
  'started',
  'settled',
]);

/**
 * `GET /v1/dispatches/{dispatchId}`: the journal's fold of the dispatch (fields no event supplied
 * yet are null) and every event recorded for it, oldest first.
 */
export const GetDispatchResponseSchema = z.looseObject({
  dispatch: z.looseObject({
    tenant: z.string(),
    runId: z.string(),
    dispatchId: z.string(),
    status: DispatchStatusSchema,
    callId: z.string().nullable(),
    toolName: z.string().nullable(),
    tool: ToolRefSchema.nullable(),
    input: z.unknown().optional(),
    effectiveInput: z.unknown().optional(),
    agent: AgentRefSchema.nullable(),
    isolation: IsolationSchema.nullable(),
    profile: z.string().nullable(),
    taint: TaintSchema.nullable(),
    verdict: VerdictSchema.nullable(),
    decidedBy: DecidedBySchema.nullable(),
    rule: z.unknown().optional(),
    reason: z.string().nullable(),
    policyRevision: z.number().int().nullable(),
    approvalKey: z.string().nullable(),
    outcome: z.enum(['ok', 'error', 'denied']).nullable(),
    result: z.unknown().optional(),
    error: WireErrorSchema.nullable(),
    requestedAt: Iso.nullable(),
    settledAt: Iso.nullable(),
    updatedAt: Iso,
    lastSeq: z.number().int(),
    eventCount: z.number().int(),
  }),
  events: z.array(
    z.looseObject({ stream: z.string(), seq: z.number().int(), event: JournalEventSchema }),
  ),
});

/** `GET /v1/runs/{runId}`: a run's status, one page of its dispatches and its oldest approvals. */
export const GetRunResponseSchema = z.looseObject({
  tenant: z.string(),
  runId: z.string(),
  status: z.enum(['running', 'suspended', 'settled']),
  dispatches: z.array(
    z.looseObject({
      dispatchId: z.string(),
      callId: z.string().nullable(),
      toolName: z.string().nullable(),
      status: DispatchStatusSchema,
      verdict: z.string().nullable(),
      decidedBy: z.string().nullable(),
      decision: z.string().nullable(),
      resolvedBy: z.string().nullable(),
      outcome: z.string().nullable(),
      errorCode: z.string().nullable(),
      approvalKey: z.string().nullable(),
      requestedAt: Iso.nullable(),
      settledAt: Iso.nullable(),
    }),
  ),
  nextCursor: z.string().nullable(),
  dispatchCount: z.number().int(),
  pending: z.array(
    z.looseObject({
      key: z.string(),
      dispatchId: z.string(),
      tool: z.string().nullable(),
      inputPreview: InputPreviewSchema,
      rule: z.unknown().optional(),
      since: Iso.nullable(),
      expires: Iso.nullable(),
    }),
  ),
  pendingCount: z.number().int(),
  firstAt: Iso.nullable(),
  lastAt: Iso.nullable(),
});

/**
 * `GET /v1/policy`: the tenant's policy document and its revision (0 and `{}` before the first
 * put). The document's own schema belongs to the permission chain (the OpenAPI document spells it
 * out); here it is any JSON object.
 */
export const GetPolicyResponseSchema = z.looseObject({
  revision: z.number().int().min(0),
  document: PolicyDocumentWireSchema,
});

/** `PUT /v1/policy`: the new revision. */
export const PutPolicyResponseSchema = z.looseObject({ revision: z.number().int().min(1) });

/** `POST /v1/policy/evaluate`: the chain's verdict on a hypothetical call, and under which revision. */
export const EvaluatePolicyResponseSchema = z.looseObject({
  verdict: VerdictSchema,
  decidedBy: DecidedBySchema,
  rule: z.unknown().optional(),
  reason: z.string().optional(),
  /** The post-hook input: what the tool would receive. */
  input: z.unknown().optional(),
  /** The effective risk class the rules saw. */
  risk: z.string(),
  advisory: z.array(z.unknown()),
  approval: z.unknown().optional(),
  diagnostics: z.array(z.unknown()),
  policyRevision: z.number().int().min(0),
});
