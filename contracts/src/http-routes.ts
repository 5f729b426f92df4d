import { z } from 'zod';
import {
  ApprovalKeySchema,
  AwaitDispatchRequestSchema,
  AwaitDispatchResponseSchema,
  EvaluatePolicyRequestSchema,
  GetApprovalRequestSchema,
  GetRunRequestSchema,
  ImportMcpToolsRequestSchema,
  ListApprovalsRequestSchema,
  ListToolsResponseSchema,
  PutPolicyRequestSchema,
  RegisterToolRequestSchema,
  RegisterToolResponseSchema,
  ResetErrorCapRequestSchema,
  ResetErrorCapResponseSchema,
  ResolveApprovalRequestSchema,
  SubmitDispatchRequestSchema,
  SubmitDispatchResponseSchema,
} from './api';
import {
  ApprovalDetailSchema,
  EvaluatePolicyResponseSchema,
  GetDispatchResponseSchema,
  GetPolicyResponseSchema,
  GetRunResponseSchema,
  ImportMcpToolsResponseSchema,
  ListApprovalsResponseSchema,
  PutPolicyResponseSchema,
  ResolveApprovalResponseSchema,
  WhoAmIResponseSchema,
} from './api-responses';
import {
  DispatchValueChunkSchema,
  DispatchValuePartSchema,
  GetDispatchValueRequestSchema,
} from './dispatch-values';
import { ErrorCode } from './errors';
import { McpServerNameSchema } from './mcp-upstream';
import { PolicyWhatIfReportSchema, PolicyWhatIfRequestSchema } from './policy-whatif';
import {
  InstallScriptRequestSchema,
  InstallScriptResponseSchema,
  ScriptInventorySchema,
} from './script-tool';
import { ApiOperation, SubjectTokenSchema as Token } from './subjects';
import { ToolNameSchema } from './tool-contract';

/**
 * The HTTP API's route table: the one place a route's method, path, operationId, body, query,
 * answer and error codes are written. The gateway's controllers take their method and path from it
 * (`@Route`), the OpenAPI document (`/v1/openapi.json`) is generated from it, and the CLI's client
 * builds its requests from it; a parity test holds the four together.
 */
export interface HttpRoute {
  readonly method: 'get' | 'post' | 'put';
  /** OpenAPI path template (`/v1/approvals/{key}`). */
  readonly path: `/v1/${string}`;
  readonly summary: string;
  /** The gateway API operation it carries (the same one the bus serves), if any. */
  readonly operation?: ApiOperation;
  /** `bearer`: the `Authorization: Bearer <token>` header; `link`: the signed token in the path. */
  readonly auth: 'bearer' | 'link';
  /** The success status; `submitDispatch` also answers 200 when it waited for the settlement. */
  readonly status: 200 | 201 | 202;
  /** Each path parameter's schema, in path order. */
  readonly params?: Readonly<Record<string, z.ZodType>>;
  /** Query parameters (text on the wire; integer ones are converted). */
  readonly query?: z.ZodObject;
  /** The JSON body. */
  readonly body?: z.ZodType;
  /** The JSON answer, or another media type's (`produces`). */
  readonly response?: z.ZodType;
  readonly produces?: 'text/html' | 'text/event-stream';
  /** The error codes this route answers (each with its status from the gateway's one table). */
  readonly errors: readonly ErrorCode[];
}

const AUTH = [ErrorCode.Unauthorized, ErrorCode.Forbidden] as const;
const BODY = [ErrorCode.InvalidRequest, ErrorCode.TooLarge] as const;
/** The broker down or not acknowledging in time. */
const BROKER = [ErrorCode.Unavailable] as const;
/** A read forwarded to the journal's projection (which may not have the row yet). */
const READ = [...AUTH, ErrorCode.InvalidRequest, ErrorCode.NotFound, ...BROKER] as const;

const route = <const R extends HttpRoute>(r: R): R => r;

export const HTTP_ROUTES = {
  listTools: route({
    method: 'get',
    path: '/v1/tools',
    summary: 'List tools and the toolsetHash',
    operation: ApiOperation.ListTools,
    auth: 'bearer',
    status: 200,
    response: ListToolsResponseSchema,
    errors: [...AUTH],
  }),
  registerTool: route({
    method: 'post',
    path: '/v1/tools',
    summary: 'Register a tool contract with its policy fields (admin)',
    operation: ApiOperation.RegisterTool,
    auth: 'bearer',
    status: 201,
    body: RegisterToolRequestSchema,
    response: RegisterToolResponseSchema,
    errors: [...AUTH, ...BODY, ErrorCode.Config, ...BROKER],
  }),
  listScripts: route({
    method: 'get',
    path: '/v1/tools/scripts',
    summary:
      'Script tools this tenant can call (the executor directory’s and its own), with params and requires, and the directory’s skipped files with reasons',
    operation: ApiOperation.ListScripts,
    auth: 'bearer',
    status: 200,
    response: ScriptInventorySchema,
    errors: [...AUTH, ...BROKER],
  }),
  installScript: route({
    method: 'put',
    path: '/v1/tools/scripts/{name}',
    summary:
      'Install or replace (overwrite: true) a script tool (admin); refusals carry details.reason; journaled as script-installed',
    operation: ApiOperation.InstallScript,
    auth: 'bearer',
    status: 200,
    params: { name: ToolNameSchema },
    body: InstallScriptRequestSchema.omit({ name: true }),
    response: InstallScriptResponseSchema,
    errors: [...AUTH, ...BODY, ErrorCode.Conflict, ErrorCode.Config, ...BROKER],
  }),
  submitDispatch: route({
    method: 'post',
    path: '/v1/dispatches',
    summary:
      'Submit a tool call; 202 with its id, or 200 with the settled result when `wait` is given and it settles in time',
    operation: ApiOperation.SubmitDispatch,
    auth: 'bearer',
    status: 202,
    body: SubmitDispatchRequestSchema,
    response: SubmitDispatchResponseSchema,
    errors: [
      ...AUTH,
      ...BODY,
      ErrorCode.UnknownTool,
      ErrorCode.Conflict,
      ErrorCode.ErrorCap,
      ...BROKER,
    ],
  }),
  getDispatch: route({
    method: 'get',
    path: '/v1/dispatches/{dispatchId}',
    summary:
      'A dispatch with its whole event history; a reply that would pass 256 KiB carries its largest values (input, effectiveInput, result) as previews and names them in `elided`',
    operation: ApiOperation.GetDispatch,
    auth: 'bearer',
    status: 200,
    params: { dispatchId: Token },
    response: GetDispatchResponseSchema,
    errors: READ,
  }),
  getDispatchValue: route({
    method: 'get',
    path: '/v1/dispatches/{dispatchId}/values/{part}',
    summary:
      "One chunk of a dispatch's `input`, `effectiveInput` or `result` as JSON text (at most 65,536 code points from `offset`; `nextOffset` continues, null after the last)",
    operation: ApiOperation.GetDispatchValue,
    auth: 'bearer',
    status: 200,
    params: { dispatchId: Token, part: DispatchValuePartSchema },
    query: GetDispatchValueRequestSchema.omit({ dispatchId: true, part: true }),
    response: DispatchValueChunkSchema,
    errors: READ,
  }),
  awaitDispatch: route({
    method: 'get',
    path: '/v1/runs/{runId}/dispatches/{dispatchId}/outcome',
    summary:
      'The outcome the journal recorded for a dispatch, read from the stream: `settled` with it, or `pending` after waiting up to `wait` ms (default 0) for it',
    operation: ApiOperation.AwaitDispatch,
    auth: 'bearer',
    status: 200,
    params: { runId: Token, dispatchId: Token },
    query: AwaitDispatchRequestSchema.omit({ runId: true, dispatchId: true }),
    response: AwaitDispatchResponseSchema,
    errors: READ,
  }),
  getRun: route({
    method: 'get',
    path: '/v1/runs/{runId}',
    summary:
      "A run's status, one page of its dispatches in request order (`nextCursor` → `cursor` for the next), `dispatchCount`, and its oldest open approvals with input previews (`pendingCount` in all; list them with /v1/approvals?runId=)",
    operation: ApiOperation.GetRun,
    auth: 'bearer',
    status: 200,
    params: { runId: Token },
    query: GetRunRequestSchema.omit({ runId: true }),
    response: GetRunResponseSchema,
    errors: READ,
  }),
  resetErrorCap: route({
    method: 'post',
    path: '/v1/runs/{runId}/error-cap/reset',
    summary: "Reset a run's consecutive-error cap (approve): its next dispatch is decided again",
    operation: ApiOperation.ResetErrorCap,
    auth: 'bearer',
    status: 200,
    params: { runId: Token },
    body: ResetErrorCapRequestSchema.omit({ runId: true }),
    response: ResetErrorCapResponseSchema,
    errors: [...AUTH, ...BODY, ...BROKER],
  }),
  getPolicy: route({
    method: 'get',
    path: '/v1/policy',
    summary: 'The current policy document and its revision (0 and {} before the first put)',
    operation: ApiOperation.GetPolicy,
    auth: 'bearer',
    status: 200,
    response: GetPolicyResponseSchema,
    errors: [...AUTH],
  }),
  putPolicy: route({
    method: 'put',
    path: '/v1/policy',
    summary:
      'Replace the policy (admin); hot-reloaded. A stale expectedRevision is 409 conflict; a document that does not validate is 422 config',
    operation: ApiOperation.PutPolicy,
    auth: 'bearer',
    status: 200,
    body: PutPolicyRequestSchema,
    response: PutPolicyResponseSchema,
    errors: [...AUTH, ...BODY, ErrorCode.Config, ErrorCode.Conflict, ...BROKER],
  }),
  evaluatePolicy: route({
    method: 'post',
    path: '/v1/policy/evaluate',
    summary: 'Dry-run the permission chain for a hypothetical call',
    operation: ApiOperation.EvaluatePolicy,
    auth: 'bearer',
    status: 200,
    body: EvaluatePolicyRequestSchema,
    response: EvaluatePolicyResponseSchema,
    errors: [...AUTH, ...BODY, ErrorCode.UnknownTool, ErrorCode.Config, ...BROKER],
  }),
  whatIfPolicy: route({
    method: 'post',
    path: '/v1/policy/whatif',
    summary:
      "Replay the journal's recorded calls through a candidate policy (admin scope); remote hooks are not called. With Accept: application/x-ndjson, progress lines then the report",
    operation: ApiOperation.WhatIfPolicy,
    auth: 'bearer',
    status: 200,
    body: PolicyWhatIfRequestSchema,
    response: PolicyWhatIfReportSchema,
    errors: [...AUTH, ...BODY, ErrorCode.Config, ...BROKER],
  }),
  importMcpTools: route({
    method: 'post',
    path: '/v1/mcp/servers/{name}/import',
    summary:
      "Import (or re-approve) a configured MCP server's tools as <name>__<tool> mcp tools (admin)",
    operation: ApiOperation.ImportMcpTools,
    auth: 'bearer',
    status: 200,
    params: { name: McpServerNameSchema },
    body: ImportMcpToolsRequestSchema.omit({ server: true }),
    response: ImportMcpToolsResponseSchema,
    errors: [...AUTH, ...BODY, ErrorCode.NotFound, ...BROKER],
  }),
  whoAmI: route({
    method: 'get',
    path: '/v1/whoami',
    summary: "The token's tenant, identity and scopes (any valid token)",
    operation: ApiOperation.WhoAmI,
    auth: 'bearer',
    status: 200,
    response: WhoAmIResponseSchema,
    errors: [ErrorCode.Unauthorized],
  }),
  listApprovals: route({
    method: 'get',
    path: '/v1/approvals',
    summary:
      "One page of pending (or resolved) approvals, each with its call's outcome once settled and a bounded preview of its input (`inputPreview`; read the approval for all of it) (dispatch or approve scope). `key` lists the calls that share an approval key; `order=newest` lists latest activity first; `resolvedBy`, `decision`, `outcome`, `since`, `until` search a history. A page holds at most `limit` approvals and ends early where its reply would grow too large: pass its `nextCursor` as `cursor` (with the same filters) for the next one",
    operation: ApiOperation.ListApprovals,
    auth: 'bearer',
    status: 200,
    query: ListApprovalsRequestSchema,
    response: ListApprovalsResponseSchema,
    errors: [...AUTH, ErrorCode.InvalidRequest, ...BROKER],
  }),
  getApproval: route({
    method: 'get',
    path: '/v1/approvals/{key}',
    summary:
      'One approval read from the journal: the call it covers (post-hook input, digest, rule, policy revision, expiry), the reason it asked, the risk, its resolution and outcome, and for a shell call its segments with the one that asked marked (dispatch or approve scope). Without dispatchId the key must match exactly one pending call: 409 conflict lists them in details.matches',
    operation: ApiOperation.GetApproval,
    auth: 'bearer',
    status: 200,
    params: { key: ApprovalKeySchema },
    query: GetApprovalRequestSchema.omit({ key: true }),
    response: ApprovalDetailSchema,
    errors: [...READ, ErrorCode.Conflict],
  }),
  resolveApproval: route({
    method: 'post',
    path: '/v1/approvals/{key}/resolve',
    summary:
      'Resolve an approval (approve scope); anything but an explicit allow denies. A key that matches more than one pending call without a dispatchId is refused with 409 conflict listing them (details.matches), and nothing is resolved',
    operation: ApiOperation.ResolveApproval,
    auth: 'bearer',
    status: 200,
    params: { key: ApprovalKeySchema },
    body: ResolveApprovalRequestSchema.omit({ key: true }),
    response: ResolveApprovalResponseSchema,
    errors: [
      ...AUTH,
      ...BODY,
      ErrorCode.NotFound,
      ErrorCode.Conflict,
      ErrorCode.AlreadyResolved,
      ErrorCode.ApprovalMismatch,
      ...BROKER,
    ],
  }),
  approvalEvents: route({
    method: 'get',
    path: '/v1/approvals/events',
    summary:
      'Server-sent events: approval:pending, approval:resolved (dispatch or approve scope; the Authorization header is required, so read it with a streaming fetch, not EventSource). Notifications to look, not records: read the approval they name before acting',
    auth: 'bearer',
    status: 200,
    produces: 'text/event-stream',
    errors: [...AUTH, ...BROKER],
  }),
  approvalLinkPage: route({
    method: 'get',
    path: '/v1/approvals/link/{token}',
    summary:
      'Resolve-by-link page (from an approval webhook): the call a signed, expiring link grants one decision on, with a button. Decides nothing. Refusals are HTML pages too: 404 for an invalid or expired link, 409 once resolved',
    auth: 'link',
    status: 200,
    params: { token: z.string().min(1).max(4096) },
    produces: 'text/html',
    errors: [
      ErrorCode.NotFound,
      ErrorCode.Conflict,
      ErrorCode.AlreadyResolved,
      ErrorCode.Unavailable,
    ],
  }),
  approvalLinkResolve: route({
    method: 'post',
    path: '/v1/approvals/link/{token}',
    summary:
      "Resolves the call with the link's decision, through the same first-resolution-wins path as the API (journaled as the link identity); a later use answers who resolved it. Answers an HTML page",
    auth: 'link',
    status: 200,
    params: { token: z.string().min(1).max(4096) },
    produces: 'text/html',
    errors: [
      ErrorCode.NotFound,
      ErrorCode.Conflict,
      ErrorCode.AlreadyResolved,
      ErrorCode.Unavailable,
    ],
  }),
} as const satisfies Record<string, HttpRoute>;

/** A route's name: its OpenAPI `operationId`. */
export type HttpRouteName = keyof typeof HTTP_ROUTES;

/** Path parameters a route takes, by name. */
export type RouteParams<N extends HttpRouteName> = (typeof HTTP_ROUTES)[N] extends {
  params: infer P;
}
  ? { [K in keyof P]: string }
  : Record<string, never>;

/** The route carrying each gateway API operation. */
export function routeOf(operation: ApiOperation): HttpRouteName {
  for (const [name, r] of Object.entries(HTTP_ROUTES) as [HttpRouteName, HttpRoute][]) {
    if (r.operation === operation) return name;
  }
  throw new Error(`no HTTP route carries ${operation}`);
}

/** A route's path with its parameters filled in (each percent-encoded). */
export function routePath(name: HttpRouteName, params: Record<string, string> = {}): string {
  return HTTP_ROUTES[name].path.replace(/\{([^}]+)\}/g, (_m, key: string) => {
    const value = params[key];
    if (value === undefined) throw new Error(`route ${name} needs the path parameter ${key}`);
    return encodeURIComponent(value);
  });
}

/** The path in Express's syntax (`/v1/approvals/:key`), for the controllers. */
export function expressPath(name: HttpRouteName): string {
  return HTTP_ROUTES[name].path.replace(/\{([^}]+)\}/g, ':$1');
}
