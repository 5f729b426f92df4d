import { z } from 'zod';
import {
  EvaluatePolicyRequestSchema,
  ImportMcpToolsRequestSchema,
  InstallScriptRequestSchema,
  InstallScriptResponseSchema,
  ScriptInventorySchema,
  ListToolsResponseSchema,
  NDJSON_MEDIA_TYPE,
  PolicyWhatIfFrameSchema,
  PolicyWhatIfReportSchema,
  PolicyWhatIfRequestSchema,
  PutPolicyRequestSchema,
  RegisterToolRequestSchema,
  RegisterToolResponseSchema,
  ResetErrorCapResponseSchema,
  ResolveApprovalRequestSchema,
  SubmitDispatchRequestSchema,
  SubmitDispatchResponseSchema,
  WireErrorSchema,
} from '@toolgate/contracts';

const schema = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' });
const json = (s: z.ZodType) => ({ content: { 'application/json': { schema: schema(s) } } });
const errorResponse = { description: 'Typed error', ...json(z.object({ error: WireErrorSchema })) };
const errors = {
  '400': errorResponse,
  '401': errorResponse,
  '403': errorResponse,
  '404': errorResponse,
};

/** The OpenAPI 3.1 description of the HTTP API, served at `/v1/openapi.json`. */
export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'Toolgate gateway',
    version: '1',
    description:
      'Tool-call dispatch plane for AI agents. Bearer tokens are per tenant with scopes dispatch, approve, admin. Errors are { error: { code, message, details } } with stable codes.',
  },
  components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
  security: [{ bearer: [] }],
  paths: {
    '/v1/tools': {
      get: {
        summary: 'List tools and the toolsetHash',
        responses: { '200': { description: 'Tools', ...json(ListToolsResponseSchema) }, ...errors },
      },
      post: {
        summary: 'Register a tool contract with its policy fields (admin)',
        requestBody: json(RegisterToolRequestSchema),
        responses: {
          '201': { description: 'Registered', ...json(RegisterToolResponseSchema) },
          '422': errorResponse,
          ...errors,
        },
      },
    },
    '/v1/tools/scripts': {
      get: {
        summary:
          'Script tools this tenant can call (the executor directory’s and its own), with params and requires, and the directory’s skipped files with reasons',
        responses: {
          '200': { description: 'Inventory', ...json(ScriptInventorySchema) },
          ...errors,
        },
      },
    },
    '/v1/tools/scripts/{name}': {
      put: {
        summary:
          'Install or replace (overwrite: true) a script tool (admin); refusals carry details.reason; journaled as script-installed',
        parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
        requestBody: json(InstallScriptRequestSchema.omit({ name: true })),
        responses: {
          '200': { description: 'Installed', ...json(InstallScriptResponseSchema) },
          '409': errorResponse,
          '413': errorResponse,
          '422': errorResponse,
          ...errors,
        },
      },
    },
    '/v1/dispatches': {
      post: {
        summary:
          'Submit a tool call; 202 with its id, or 200 with the settled result when `wait` is given and it settles in time',
        requestBody: json(SubmitDispatchRequestSchema),
        responses: {
          '200': { description: 'Settled', ...json(SubmitDispatchResponseSchema) },
          '202': { description: 'Accepted', ...json(SubmitDispatchResponseSchema) },
          ...errors,
        },
      },
    },
    '/v1/dispatches/{dispatchId}': {
      get: {
        summary:
          'A dispatch with its whole event history; a reply that would pass 256 KiB carries its largest values (input, effectiveInput, result) as previews and names them in `elided`',
        parameters: [
          { name: 'dispatchId', in: 'path', required: true, schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'Dispatch' }, ...errors },
      },
    },
    '/v1/dispatches/{dispatchId}/values/{part}': {
      get: {
        summary:
          "One chunk of a dispatch's `input`, `effectiveInput` or `result` as JSON text (at most 65,536 code points from `offset`; `nextOffset` continues, null after the last)",
        parameters: [
          { name: 'dispatchId', in: 'path', required: true, schema: { type: 'string' } },
          {
            name: 'part',
            in: 'path',
            required: true,
            schema: { type: 'string', enum: ['input', 'effectiveInput', 'result'] },
          },
          { name: 'offset', in: 'query', required: false, schema: { type: 'integer' } },
        ],
        responses: { '200': { description: 'DispatchValueChunk' }, ...errors },
      },
    },
    '/v1/runs/{runId}': {
      get: {
        summary:
          "A run's status, one page of its dispatches in request order (`nextCursor` → `cursor` for the next), `dispatchCount`, and its oldest open approvals with input previews (`pendingCount` in all; list them with /v1/approvals?runId=)",
        parameters: [
          { name: 'runId', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
          { name: 'limit', in: 'query', required: false, schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'Run' }, ...errors },
      },
    },
    '/v1/runs/{runId}/error-cap/reset': {
      post: {
        summary:
          "Reset a run's consecutive-error cap (approve): its next dispatch is decided again",
        parameters: [{ name: 'runId', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'Reset', ...json(ResetErrorCapResponseSchema) },
          ...errors,
        },
      },
    },
    '/v1/policy': {
      get: {
        summary: 'The current policy document and its revision',
        responses: { '200': { description: 'Policy' }, ...errors },
      },
      put: {
        summary: 'Replace the policy (admin); hot-reloaded',
        requestBody: json(PutPolicyRequestSchema),
        responses: {
          '200': { description: 'New revision' },
          '409': errorResponse,
          '422': errorResponse,
          ...errors,
        },
      },
    },
    '/v1/policy/evaluate': {
      post: {
        summary: 'Dry-run the permission chain for a hypothetical call',
        requestBody: json(EvaluatePolicyRequestSchema),
        responses: { '200': { description: 'Verdict' }, ...errors },
      },
    },
    '/v1/policy/whatif': {
      post: {
        summary:
          "Replay the journal's recorded calls through a candidate policy (admin scope); remote hooks are not called. With Accept: application/x-ndjson, progress lines then the report",
        requestBody: json(PolicyWhatIfRequestSchema),
        responses: {
          '200': {
            description: 'Every call whose verdict the candidate changes, and counts',
            content: {
              'application/json': { schema: schema(PolicyWhatIfReportSchema) },
              [NDJSON_MEDIA_TYPE]: { schema: schema(PolicyWhatIfFrameSchema) },
            },
          },
          '422': errorResponse,
          '503': errorResponse,
          ...errors,
        },
      },
    },
    '/v1/mcp/servers/{name}/import': {
      post: {
        summary:
          "Import (or re-approve) a configured MCP server's tools as <name>__<tool> mcp tools (admin)",
        parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
        requestBody: json(ImportMcpToolsRequestSchema.omit({ server: true })),
        responses: {
          '200': {
            description: 'The tools imported and the ones skipped, with the new toolsetHash',
          },
          '503': errorResponse,
          ...errors,
        },
      },
    },
    '/v1/whoami': {
      get: {
        summary: "The token's tenant, identity and scopes (any valid token)",
        responses: { '200': { description: 'Who the token is' }, '401': errorResponse },
      },
    },
    '/v1/approvals': {
      get: {
        summary:
          "One page of pending (or resolved) approvals, each with its call's outcome once settled and a bounded preview of its input (`inputPreview`; read the approval for all of it) (dispatch or approve scope). `key` lists the calls that share an approval key; `order=newest` lists latest activity first; `resolvedBy`, `decision`, `outcome`, `since`, `until` search a history. A page holds at most `limit` approvals and ends early where its reply would grow too large: pass its `nextCursor` as `cursor` (with the same filters) for the next one",
        parameters: [
          'runId',
          'tool',
          'key',
          'minAgeMs',
          'status',
          'order',
          'resolvedBy',
          'decision',
          'outcome',
          'since',
          'until',
          'limit',
          'cursor',
        ].map((name) => ({
          name,
          in: 'query',
          required: false,
          schema: { type: 'string' },
        })),
        responses: { '200': { description: 'Approvals' }, ...errors },
      },
    },
    '/v1/approvals/{key}': {
      get: {
        summary:
          'One approval read from the journal: the call it covers (post-hook input, digest, rule, policy revision, expiry), the reason it asked, the risk, its resolution and outcome, and for a shell call its segments with the one that asked marked (dispatch or approve scope). Without dispatchId the key must match exactly one pending call: 409 conflict lists them in details.matches',
        parameters: [
          { name: 'key', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'dispatchId', in: 'query', required: false, schema: { type: 'string' } },
          { name: 'runId', in: 'query', required: false, schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'Approval' }, '409': errorResponse, ...errors },
      },
    },
    '/v1/approvals/{key}/resolve': {
      post: {
        summary:
          'Resolve an approval (approve scope); anything but an explicit allow denies. A key that matches more than one pending call without a dispatchId is refused with 409 conflict listing them (details.matches), and nothing is resolved',
        parameters: [{ name: 'key', in: 'path', required: true, schema: { type: 'string' } }],
        requestBody: json(ResolveApprovalRequestSchema.omit({ key: true })),
        responses: { '200': { description: 'Resolved' }, '409': errorResponse, ...errors },
      },
    },
    '/v1/approvals/link/{token}': {
      get: {
        summary:
          'Resolve-by-link page (from an approval webhook): the call a signed, expiring link grants one decision on, with a button. Decides nothing',
        parameters: [{ name: 'token', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'text/html' },
          '404': { description: 'Invalid or expired link' },
          '409': { description: 'Already resolved' },
        },
      },
      post: {
        summary:
          "Resolves the call with the link's decision, through the same first-resolution-wins path as the API (journaled as the link identity); a later use answers who resolved it",
        parameters: [{ name: 'token', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'text/html' },
          '404': { description: 'Invalid or expired link' },
          '409': { description: 'Already resolved' },
        },
      },
    },
    '/v1/approvals/events': {
      get: {
        summary:
          'Server-sent events: approval:pending, approval:resolved (dispatch or approve scope; the Authorization header is required, so read it with a streaming fetch, not EventSource). Notifications to look, not records: read the approval they name before acting',
        responses: { '200': { description: 'text/event-stream' }, ...errors },
      },
    },
  },
} as const;
