import { z } from 'zod';
import {
  AgentRefSchema,
  DecidedBySchema,
  IsolationSchema,
  TaintSchema,
  ToolRefSchema,
  WireErrorSchema,
  type SettledEvent,
} from './events';
import { RiskSchema, ToolContractSchema, ToolNameSchema, ToolPolicySchema } from './tool-contract';
import { SubjectTokenSchema as Token } from './subjects';
import { boundedJson } from './json-limits';
import { PolicyDocumentWireSchema } from './policy-document-wire';
import { ListCursorSchema, PageLimit, type InputPreview, type Page } from './list-paging';
import { McpServerNameSchema } from './mcp-upstream';

/**
 * Request and response bodies of the gateway's API. The HTTP routes and the NATS request/reply
 * operations (`subjects.api(op)`) take the same bodies; the tenant always comes from the bearer
 * token (HTTP `Authorization` header, NATS `Authorization` message header), never from the body.
 *
 * NATS replies are `{ ok: true, data }` or `{ ok: false, error: { code, message, details } }`.
 */

/** Register (or re-register) a tool contract with its policy fields. */
export const RegisterToolRequestSchema = z.strictObject({
  tool: ToolContractSchema.extend({ policy: ToolPolicySchema.optional() }),
});
export type RegisterToolRequest = z.input<typeof RegisterToolRequestSchema>;

export const ToolViewSchema = ToolContractSchema.extend({
  policy: ToolPolicySchema,
  contractHash: z.string(),
  builtin: z.boolean(),
});
export type ToolView = z.infer<typeof ToolViewSchema>;

/**
 * What registering a tool answers: the stored tool, the tenant's new toolset hash, and what the
 * schema does that is probably a mistake but was accepted (an unknown keyword such as a misspelt
 * `maxLength`, a format nothing checks).
 */
export const RegisterToolResponseSchema = ToolViewSchema.extend({
  toolsetHash: z.string(),
  warnings: z.array(z.string()),
});
export type RegisterToolResponse = z.infer<typeof RegisterToolResponseSchema>;

/** Reset a run's consecutive-error cap (the `approve` scope): its next dispatch runs again. */
export const ResetErrorCapRequestSchema = z.strictObject({
  runId: Token,
  reason: z.string().max(2048).optional(),
});
export type ResetErrorCapRequest = z.input<typeof ResetErrorCapRequestSchema>;

/** The streak before the reset, and after it (always 0). */
export const ResetErrorCapResponseSchema = z.object({
  runId: Token,
  previousFailures: z.number().int().min(0),
  failures: z.literal(0),
});
export type ResetErrorCapResponse = z.infer<typeof ResetErrorCapResponseSchema>;

export const ListToolsResponseSchema = z.object({
  tools: z.array(ToolViewSchema),
  toolsetHash: z.string(),
});
export type ListToolsResponse = z.infer<typeof ListToolsResponseSchema>;

/** Submit a tool call. `wait` (ms, or true for the default) returns the settled result when it comes in time. */
export const SubmitDispatchRequestSchema = z.strictObject({
  runId: Token,
  callId: z.string().min(1).max(256),
  agent: AgentRefSchema,
  tool: ToolNameSchema,
  /** Any JSON, nested at most `MAX_JSON_DEPTH` (100) levels deep. */
  input: boundedJson(z.unknown().refine((v) => v !== undefined, 'input is required')),
  isolation: IsolationSchema.default('none'),
  profile: z.string().min(1).max(128).optional(),
  taint: TaintSchema.optional(),
  /** The dispatch this call retries after a model-retry error (bounded to 2 per call chain). */
  retryOf: Token.optional(),
  wait: z.union([z.boolean(), z.number().int().min(0).max(300_000)]).optional(),
});
export type SubmitDispatchRequest = z.input<typeof SubmitDispatchRequestSchema>;

export const DispatchStateSchema = z.enum([
  'requested',
  'decided',
  'suspended',
  'running',
  'settled',
]);
export type DispatchState = z.infer<typeof DispatchStateSchema>;

/** The settled outcome as the caller (and the model) sees it. */
export const DispatchOutcomeSchema = z.object({
  outcome: z.enum(['ok', 'error', 'denied']),
  result: z.unknown().optional(),
  error: WireErrorSchema.optional(),
});
export type DispatchOutcome = z.infer<typeof DispatchOutcomeSchema>;

/** What the caller (and the model) sees of a settled dispatch. */
export function outcomeOf(event: SettledEvent): DispatchOutcome {
  return {
    outcome: event.outcome,
    ...(event.result !== undefined ? { result: event.result } : {}),
    ...(event.error ? { error: event.error } : {}),
  };
}

export const SubmitDispatchResponseSchema = z.object({
  dispatchId: z.string(),
  /** `accepted`: newly journaled; `replayed`: this exact call was journaled before. */
  status: z.enum(['accepted', 'replayed']),
  state: DispatchStateSchema,
  settled: DispatchOutcomeSchema.optional(),
});
export type SubmitDispatchResponse = z.infer<typeof SubmitDispatchResponseSchema>;

export const GetDispatchRequestSchema = z.strictObject({ dispatchId: Token });

/**
 * The outcome the journal recorded for a dispatch of the caller's tenant, read from the stream
 * (verified, as every reader does): waited for up to `wait` ms (default 0) when not yet recorded.
 * What a client that heard a settlement on the run's subjects, which it cannot verify, asks.
 */
export const AwaitDispatchRequestSchema = z.strictObject({
  runId: Token,
  dispatchId: Token,
  wait: z.number().int().min(0).max(300_000).optional(),
});
export type AwaitDispatchRequest = z.input<typeof AwaitDispatchRequestSchema>;

/** `settled` with the recorded outcome, or `pending`: nothing settled is recorded (yet). */
export const AwaitDispatchResponseSchema = z.object({
  dispatchId: z.string(),
  state: z.enum(['settled', 'pending']),
  settled: DispatchOutcomeSchema.optional(),
});
export type AwaitDispatchResponse = z.infer<typeof AwaitDispatchResponseSchema>;
/**
 * A run. Its dispatches are paged in request order (`limit` per page, default and most in
 * `PageLimit.runDispatches`, and never more than a bounded reply holds): `cursor` is the previous page's `nextCursor`.
 */
export const GetRunRequestSchema = z.strictObject({
  runId: Token,
  cursor: ListCursorSchema.optional(),
  limit: z.number().int().min(1).max(PageLimit.runDispatches.max).optional(),
});
export type GetRunRequest = z.input<typeof GetRunRequestSchema>;

export const PutPolicyRequestSchema = z.strictObject({
  /**
   * The policy document (validated against the permissions library's schema). No key at any depth
   * may be `__proto__`, `constructor` or `prototype`.
   */
  document: PolicyDocumentWireSchema,
  /** Optimistic concurrency: the revision this edit was based on. */
  expectedRevision: z.number().int().min(0).optional(),
});
export type PutPolicyRequest = z.input<typeof PutPolicyRequestSchema>;

export const EvaluatePolicyRequestSchema = z.strictObject({
  tool: ToolNameSchema,
  input: boundedJson(z.unknown()),
  agent: AgentRefSchema.default({ agentType: 'dry-run' }),
  profile: z.string().min(1).max(128).optional(),
  isolation: IsolationSchema.default('none'),
  taint: TaintSchema.optional(),
});
export type EvaluatePolicyRequest = z.input<typeof EvaluatePolicyRequestSchema>;

export const ApprovalKeySchema = z.string().regex(/^[0-9a-f]{64}$/, 'approval keys are sha256 hex');

export const ListApprovalsRequestSchema = z.strictObject({
  runId: Token.optional(),
  tool: ToolNameSchema.optional(),
  /** Only the approvals of this key (identical calls share one: the same call in several runs). */
  key: ApprovalKeySchema.optional(),
  /** Only approvals pending for at least this long. */
  minAgeMs: z.number().int().min(0).optional(),
  status: z.enum(['pending', 'resolved', 'all']).optional(),
  /**
   * `oldest` (default): oldest suspension first, the order to work through a queue in; `newest`:
   * latest activity (resolution, else suspension) first, the order of a history.
   */
  order: z.enum(['oldest', 'newest']).optional(),
  /** Only approvals resolved by this identity (an approver, or `timeout`'s system actor). */
  resolvedBy: z.string().min(1).max(256).optional(),
  /** Only approvals resolved this way. */
  decision: z.enum(['allow', 'deny']).optional(),
  /** Only approvals whose call ended this way. */
  outcome: z.enum(['ok', 'error', 'denied']).optional(),
  /** Only approvals whose latest activity (resolution, else suspension) is at or after this instant. */
  since: z.iso.datetime({ offset: true }).optional(),
  /** ... and before this instant. */
  until: z.iso.datetime({ offset: true }).optional(),
  /** At most this many per page; a page also ends where its reply would grow too large. */
  limit: z.number().int().min(1).max(PageLimit.approvals.max).default(PageLimit.approvals.default),
  /** The previous page's `nextCursor`, with the same filters and order. */
  cursor: ListCursorSchema.optional(),
});
export type ListApprovalsRequest = z.input<typeof ListApprovalsRequestSchema>;

/**
 * Resolve an approval. `decision` is deliberately loose on the wire: it normalises to an
 * ApprovalDecision and fails closed — anything but an explicit allow is a deny.
 */
export const ResolveApprovalRequestSchema = z.strictObject({
  key: ApprovalKeySchema,
  decision: z.unknown(),
  reason: z.string().max(2048).optional(),
  /** When given, must equal the digest of the input that was asked for. */
  inputDigest: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  /**
   * Which parked dispatch. A key alone names identical calls (the same call in two runs): when it
   * matches more than one pending approval the resolution is refused with `conflict`, listing them
   * in `details.matches`, and nothing is resolved.
   */
  dispatchId: Token.optional(),
  /**
   * The dispatch's run: with `dispatchId`, the parked call is read straight from the journal;
   * without it, it narrows a key to that run's pending approvals.
   */
  runId: Token.optional(),
});
export type ResolveApprovalRequest = z.input<typeof ResolveApprovalRequestSchema>;

/** One approval with what an approver needs to decide it (`GET /v1/approvals/{key}`, `approvals.get`). */
export const GetApprovalRequestSchema = z.strictObject({
  key: ApprovalKeySchema,
  /** Which dispatch; a key alone must match exactly one pending approval (else `conflict`). */
  dispatchId: Token.optional(),
  /** With `dispatchId`, the approval is read straight from the journal stream. */
  runId: Token.optional(),
});
export type GetApprovalRequest = z.input<typeof GetApprovalRequestSchema>;

/** A pending approval a key matched, as `conflict` lists them (`details.matches`). */
export interface ApprovalMatch {
  dispatchId: string;
  runId: string;
  toolName: string | null;
  agent: z.infer<typeof AgentRefSchema> | null;
  suspendedAt: string | null;
}

/** How a parked call ended after its resolution: `settled`'s outcome. */
export interface ApprovalOutcome {
  outcome: 'ok' | 'error' | 'denied';
  /** The error's code when the call did not succeed. */
  errorCode: string | null;
  at: string;
}

/** One segment of a shell command (`a; b && c | d` has four), as an approver sees it. */
export interface ShellSegmentView {
  /** Its words after quote removal: what the program receives (redirections included). */
  argv: string[];
  /** Whether this segment is what made the policy ask. */
  asked: boolean;
  /** Why it asked: the pattern it matched, or why it cannot be checked. */
  why: string | null;
  /** Why no allow pattern can cover it (inline code, a substitution, ...), when that is so. */
  unmatchable: string | null;
}

/**
 * A pending shell call, parsed the way the permission chain parsed it. `scope` says whether the
 * rule that asked singled out segments (`segments`: an argv pattern, a protected path, a command
 * that cannot be checked) or covers the call as a whole (`call`: a rule on the tool or its risk,
 * a hook, the default), in which case no segment is marked.
 */
export interface ShellApprovalView {
  command: string;
  scope: 'segments' | 'call';
  segments: ShellSegmentView[];
}

/** What `GET /v1/approvals/{key}` answers. */
export interface ApprovalDetail {
  approval: ApprovalView;
  /** The reason the chain gave for asking (the `decided` event's), when it gave one. */
  askReason: string | null;
  /** The tool's declared risk class (`undeclared` when it declares none). */
  risk: string;
  /**
   * For a `shell` call: its segments, with the one that asked marked; null for another tool, and
   * for a shell command too large to show within the reply's budget (`shellElided`).
   */
  shell: ShellApprovalView | null;
  /**
   * `['effectiveInput']` when the reply would pass 256 KiB with the whole input: `approval.input`
   * is then an `ElidedValue` (its preview) and the input is read whole, in chunks, with
   * `dispatch.value` (part `effectiveInput`, the post-hook input the approval covers); else `[]`.
   */
  elided: 'effectiveInput'[];
  /** True when a shell call's segments were left out to keep the reply within its budget. */
  shellElided: boolean;
}

/**
 * Who a bearer token is (`GET /v1/whoami`): its tenant, identity and scopes, and what the console
 * shows besides: the deployment's trace UI link template (`TRACE_UI_URL`, with `{traceId}` where
 * a dispatch's trace id goes; null when none is configured — build links with `traceLink`).
 */
export interface WhoAmIResponse {
  tenant: string;
  identity: string;
  scopes: Scope[];
  traceUrlTemplate: string | null;
}

/**
 * An approval as the read API lists it (`approvals.list`, `run.get`): the journal's fold of one
 * dispatch's `suspended` and `resolved` events. Fields not folded yet are null.
 */
export interface ApprovalView {
  tenant: string;
  runId: string;
  dispatchId: string;
  approvalKey: string;
  inputDigest: string;
  policyRevision: number;
  status: 'pending' | 'resolved';
  toolName: string | null;
  tool: z.infer<typeof ToolRefSchema> | null;
  /** The pending call's post-hook input. */
  input: unknown;
  agent: z.infer<typeof AgentRefSchema> | null;
  isolation: z.infer<typeof IsolationSchema> | null;
  profile: string | null;
  decidedBy: z.infer<typeof DecidedBySchema> | null;
  /** The rule that asked; absent when none did (a hook, canUseTool, the default). */
  rule?: unknown;
  submittedBy: string | null;
  onTimeout: 'allow' | 'deny' | null;
  separationOfDuties: boolean | null;
  suspendedAt: string | null;
  expiresAt: string | null;
  decision: 'allow' | 'deny' | null;
  reason: string | null;
  resolvedBy: string | null;
  source: 'human' | 'timeout' | 'policy' | null;
  resolvedAt: string | null;
  updatedAt: string;
  /** How the call ended, once it settled (filled by the listing and the detail; null before). */
  settled?: ApprovalOutcome | null;
  /**
   * The W3C trace the call was submitted in (its dispatch's `traceId`, filled by the listing and
   * the detail): what a trace UI link names; null when it was requested without one.
   */
  traceId?: string | null;
}

/**
 * An approval as a list carries it: everything of {@link ApprovalView} but the input, of which it
 * carries a bounded preview (read the approval — `GET /v1/approvals/{key}?dispatchId=&runId=` —
 * for all of it). A rule too large to list is replaced by `{ kind: 'too-large', bytes }`.
 */
export type ApprovalListItem = Omit<ApprovalView, 'input'> & { inputPreview: InputPreview };

/** One page of `approvals.list`. */
export interface ListApprovalsResponse extends Page {
  approvals: ApprovalListItem[];
}

/** Normalises any resolution value; fails closed. */
export function normaliseApprovalDecision(value: unknown): 'allow' | 'deny' {
  if (value === 'allow') return 'allow';
  if (
    typeof value === 'object' &&
    value !== null &&
    (value as { decision?: unknown }).decision === 'allow'
  ) {
    return 'allow';
  }
  return 'deny';
}

/** A successful NATS reply of the gateway's API (and of the journal's queries). */
export const ApiOkReplySchema = z.object({ ok: z.literal(true), data: z.unknown() });

/** The NATS reply envelope. */
export const ApiReplySchema = z.union([
  ApiOkReplySchema,
  z.object({ ok: z.literal(false), error: WireErrorSchema }),
]);
export type ApiReply<T = unknown> =
  { ok: true; data: T } | { ok: false; error: z.infer<typeof WireErrorSchema> };

/** Bearer-token scopes. */
export const ScopeSchema = z.enum(['dispatch', 'approve', 'admin']);
export type Scope = z.infer<typeof ScopeSchema>;

/**
 * `POST /v1/mcp/servers/{name}/import` (admin; `mcp.servers.import` on the bus, with `server` in
 * the body): import (or re-approve) an upstream server's tools. Risk and approval are the admin's
 * to declare per upstream tool name; the server's own annotations are untrusted and never become
 * policy.
 */
export const ImportMcpToolsRequestSchema = z.strictObject({
  /** The configured upstream (HTTP: the path's `{name}`). */
  server: McpServerNameSchema,
  /** Only these upstream tools (default: every tool the server lists). */
  tools: z.array(z.string().min(1).max(128)).max(1000).optional(),
  risk: z.record(z.string(), RiskSchema).optional(),
  needsApproval: z.record(z.string(), z.boolean()).optional(),
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
});
export type ImportMcpToolsRequest = z.input<typeof ImportMcpToolsRequestSchema>;

/** What an import answers: the tools registered, the ones it could not take and why. */
export interface ImportMcpToolsResponse {
  server: string;
  imported: { name: string; tool: string; contractHash: string; definitionHash: string }[];
  skipped: { tool: string; reason: string }[];
  toolsetHash: string;
}
