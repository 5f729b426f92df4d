import { randomUUID } from 'node:crypto';
import {
  bearerAuthChallengeResponse,
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  createRequestStateCodec,
  inputRequired,
  OAuthError,
  originValidationResponse,
  ProtocolError,
  ProtocolErrorCode,
  requireBearerAuth,
  Server,
  TRACEPARENT_META_KEY,
  TRACESTATE_META_KEY,
  type AuthInfo,
  type CallToolResult,
  type InputRequiredResult,
  type McpRequestContext,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ApiOperation,
  dispatchKey,
  ErrorCode,
  ToolgateError,
  isSubjectToken,
  type ListToolsResponse,
  type SubmitDispatchResponse,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import type { GatewayApi } from '../api/gateway-api';
import type { Principal } from '../auth/token-auth';
import type { DispatchCanceller } from '../dispatch/dispatch-canceller';
import { mcpAnswerFor } from './mcp-errors';
import { McpTasks, serveTasks } from './mcp-tasks';
import { pendingResult, settledResult, toMcpTools, type CallIds } from './mcp-tool-view';
import {
  checkParkedCall,
  parkedCall,
  type ConsumedStates,
  type ParkedCall,
} from './parked-call-state';

import { MCP_PATH, PROTECTED_RESOURCE_PATH } from './mcp-paths';

/** `_meta` keys a client may set to name its run and call (a replay of the same call is free). */
export const RUN_ID_META_KEY = 'io.toolgate/runId';
export const CALL_ID_META_KEY = 'io.toolgate/callId';

export interface McpEdgeOptions {
  api: GatewayApi;
  registry: ToolRegistry;
  publisher: JournalPublisher;
  consumed: ConsumedStates;
  /** Stops a running dispatch whose MCP client closed its request. */
  canceller: Pick<DispatchCanceller, 'cancel'>;
  /** The HMAC key of `requestState` (≥ 32 bytes), shared by every gateway replica. */
  stateKey: Uint8Array;
  stateTtlSeconds: number;
  /** Hostnames a browser `Origin` may name (a request without one passes). */
  allowedOrigins: readonly string[];
  /** The gateway's public base URL; else derived from each request's Host. */
  publicUrl?: string;
  /** Authorization servers advertised in the protected-resource metadata. */
  authorizationServers: readonly string[];
  /** How long a retried parked call waits for its resolution before pausing again. */
  approvalWaitMs: number;
  /** How often a call that asked for progress (a `progressToken`) hears that it still runs. */
  progressIntervalMs?: number;
  version: string;
}

/** The MCP edge as a web-standard handler: metadata, Origin, bearer auth, then the SDK. */
export interface McpEdge {
  /** `parsedBody`: the request's JSON body when the caller already read it (the SDK then does not). */
  fetch(request: Request, init?: { parsedBody?: unknown }): Promise<Response>;
  close(): Promise<void>;
}

/**
 * Toolgate as an MCP server. Every request passes the `Origin` allowlist and a bearer token of the
 * gateway's grants (a `401` names the RFC 9728 metadata); the SDK then serves 2026-07-28 and the
 * 2025 era statelessly from one factory. `tools/list` and `tools/call` go through
 * {@link GatewayApi.call} — the HTTP API's own path: authentication, scope, span, metrics and the
 * dispatch submitter (contract check, chain, journal, executor). A call that waits for a person
 * answers the protocol's pause: `input_required` with a sealed, principal-bound, single-use
 * `requestState` on 2026-07-28; an error result naming the approval and how to collect the
 * outcome on 2025-11-25; a durable task, whose state is the journal's, to a client of tasks at
 * either revision (mcp-tasks.ts). Nothing here runs a tool: a retry replays the journaled dispatch, which
 * the executor runs only after a `decided` allow or a `resolved` allow.
 */
export function createMcpEdge(options: McpEdgeOptions): McpEdge {
  const codec = createRequestStateCodec<ParkedCall>({
    key: options.stateKey,
    ttlSeconds: options.stateTtlSeconds,
    // The spec's user binding: a state minted for one principal is refused for any other.
    bind: (ctx) => principalBinding(ctx.http?.authInfo),
  });

  const tasks = new McpTasks({
    api: options.api,
    publisher: options.publisher,
    canceller: options.canceller,
    key: options.stateKey,
    cancelWaitMs: options.approvalWaitMs,
  });

  const factory = (context: McpRequestContext) => {
    // Tasks are the 2025-11-25 `tasks` capability: a task-augmented tools/call answers a task whose
    // state is the journal's (see mcp-tasks.ts). The 2026-07-28 era has no `capabilities.tasks`.
    const legacy = context.era === 'legacy';
    const server = new ToolgateServer(
      { name: 'toolgate', version: options.version },
      {
        capabilities: {
          tools: { listChanged: false },
          ...(legacy ? { tasks: TASKS_CAPABILITY } : { extensions: { [TASKS_EXTENSION_ID]: {} } }),
        },
        requestState: { verify: codec.verify },
        // A pause is answered per era below; the shim's server-side elicitation needs a session.
        inputRequired: { legacyShim: false },
      },
    );
    server.setRequestHandler('tools/list', async (_request, ctx) => {
      const list = (await callApi(
        options.api,
        ApiOperation.ListTools,
        ctx,
        {},
      )) as ListToolsResponse;
      const tools = toMcpTools(list);
      return {
        tools: legacy
          ? tools.map((tool) => ({ ...tool, execution: { taskSupport: 'optional' as const } }))
          : tools,
      };
    });
    server.setRequestHandler('tools/call', (request, ctx) =>
      callTool(options, codec, tasks, context.era, request.params, ctx, () => stopping.value),
    );
    serveTasks(server, tasks, options.api, context.era);
    return server;
  };

  const stopping = { value: false };
  const handler = createMcpHandler(factory, { legacy: 'stateless' });
  // Made once per metadata URL, not per request (the URL changes only with the request's host
  // when no public URL is configured; one entry is kept, so a client cannot grow a cache).
  const verifier = verifierOf(options.api);
  let gate: { url: string; check: ReturnType<typeof requireBearerAuth> } | undefined;
  const gateFor = (resourceMetadataUrl: string) => {
    if (gate?.url !== resourceMetadataUrl) {
      gate = {
        url: resourceMetadataUrl,
        check: requireBearerAuth({ verifier, resourceMetadataUrl }),
      };
    }
    return gate.check;
  };

  return {
    async fetch(request, init) {
      const url = new URL(request.url);
      const base = options.publicUrl?.replace(/\/$/, '') ?? url.origin;
      const metadataUrl = `${base}${PROTECTED_RESOURCE_PATH}${MCP_PATH}`;
      if (url.pathname.startsWith(PROTECTED_RESOURCE_PATH)) {
        return protectedResourceMetadata(request, base, options.authorizationServers);
      }
      const badOrigin = originValidationResponse(request, [...options.allowedOrigins]);
      if (badOrigin) return badOrigin;
      const auth = await gateFor(metadataUrl)(request);
      if (auth instanceof Response) return auth;
      const scopes = new Set(auth.scopes);
      if (!scopes.has('dispatch') && !scopes.has('admin')) {
        return bearerAuthChallengeResponse(
          new OAuthError('insufficient_scope', 'this token lacks the "dispatch" scope'),
          { requiredScopes: ['dispatch'], resourceMetadataUrl: metadataUrl },
        );
      }
      return handler.fetch(request, {
        authInfo: auth,
        ...(init?.parsedBody !== undefined ? { parsedBody: init.parsedBody } : {}),
      });
    },
    async close() {
      // The gateway is stopping, not the clients giving up: the exchanges the close aborts leave
      // their dispatches running (journaled; a client collects them on another replica).
      stopping.value = true;
      await handler.close();
    },
  };
}

/** RFC 9728 metadata of the `/mcp` resource (served at the root and the path-aware location). */
function protectedResourceMetadata(
  request: Request,
  base: string,
  authorizationServers: readonly string[],
): Response {
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    return new Response(null, { status: 405, headers: { allow: 'GET, HEAD' } });
  }
  return Response.json(
    {
      resource: `${base}${MCP_PATH}`,
      ...(authorizationServers.length ? { authorization_servers: [...authorizationServers] } : {}),
      bearer_methods_supported: ['header'],
      scopes_supported: ['dispatch', 'approve', 'admin'],
      resource_name: 'Toolgate',
    },
    { headers: { 'cache-control': 'max-age=300' } },
  );
}

/**
 * The gateway's bearer grants as the SDK's verifier. The grants are static (no expiry of their
 * own), so a verification is given a short validity of its own, which the SDK requires.
 */
function verifierOf(api: GatewayApi) {
  return {
    async verifyAccessToken(token: string): Promise<AuthInfo> {
      let principal: Principal;
      try {
        principal = api.auth.authenticate(`Bearer ${token}`);
      } catch {
        throw new OAuthError('invalid_token', 'invalid bearer token');
      }
      return {
        token,
        clientId: principal.identity,
        scopes: [...principal.scopes].sort(),
        expiresAt: Math.floor(Date.now() / 1000) + 300,
        // The principal this very token resolved to: the API call of the same request uses it
        // rather than hashing and looking the token up a second time.
        extra: { tenant: principal.tenant, [PRINCIPAL]: principal },
      };
    },
  };
}

/** Where {@link verifierOf} keeps the request's principal in the SDK's `AuthInfo.extra`. */
const PRINCIPAL = Symbol('toolgate.principal');

function principalBinding(auth: AuthInfo | undefined): string {
  return `${String(auth?.extra?.tenant ?? '')}\0${auth?.clientId ?? ''}`;
}

/** The W3C trace context of an MCP request: `_meta` (2026-07-28) first, else the HTTP headers. */
function traceCarrier(ctx: ServerContext): Record<string, string> {
  const meta = (ctx.mcpReq._meta ?? {}) as Record<string, unknown>;
  const headers = ctx.http?.req?.headers;
  const carrier: Record<string, string> = {};
  const traceparent = meta[TRACEPARENT_META_KEY] ?? headers?.get('traceparent');
  const tracestate = meta[TRACESTATE_META_KEY] ?? headers?.get('tracestate');
  if (typeof traceparent === 'string') carrier.traceparent = traceparent;
  if (typeof tracestate === 'string') carrier.tracestate = tracestate;
  return carrier;
}

/** One gateway operation for the request's principal, on the HTTP API's path; errors mapped once. */
async function callApi(
  api: GatewayApi,
  operation: ApiOperation,
  ctx: ServerContext,
  body: unknown,
): Promise<unknown> {
  const auth = ctx.http?.authInfo;
  const token = auth?.token;
  const principal = auth?.extra?.[PRINCIPAL as unknown as string] as Principal | undefined;
  try {
    return await api.call(
      operation,
      token ? `Bearer ${token}` : undefined,
      body,
      traceCarrier(ctx),
      { signal: ctx.mcpReq.signal, ...(principal ? { principal } : {}) },
    );
  } catch (err) {
    const answer = mcpAnswerFor(err);
    if (answer.kind === 'protocol') throw answer.error;
    throw new CallErrorResult(answer.error);
  }
}

/**
 * The SDK's server, answering a request whose params the SDK's own wire schema refuses (a
 * `tools/list` cursor that is a number, an `initialize` without `clientInfo`) as invalid params —
 * `-32602`, Toolgate's `invalid-request` in `data`, the refused fields named — where the SDK throws
 * a plain `Error` holding the schema's issues, which its protocol layer answers as an internal
 * error with that dump as the message. Through the hook the SDK gives subclasses for this.
 */
class ToolgateServer extends Server {
  protected override _wrapHandler(
    method: string,
    handler: Parameters<Server['_wrapHandler']>[1],
  ): ReturnType<Server['_wrapHandler']> {
    const wrapped = super._wrapHandler(method, handler);
    return async (request, ctx) => {
      try {
        return await wrapped(request, ctx);
      } catch (err) {
        const issues = schemaIssues(err);
        if (!issues) throw err;
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `invalid params for ${method}`, {
          code: ErrorCode.InvalidRequest,
          retryable: false,
          details: { issues },
        });
      }
    };
  }
}

/**
 * The schema issues a plain `Error` from the SDK's request validation carries as its message (a
 * JSON array of `{ path, message }`), at most five, or undefined for any other error.
 */
function schemaIssues(err: unknown): { path: string; message: string }[] | undefined {
  if (!(err instanceof Error) || err.constructor !== Error || !err.message.startsWith('[')) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(err.message);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length === 0) return undefined;
  const issues: { path: string; message: string }[] = [];
  for (const issue of parsed as { path?: unknown; message?: unknown }[]) {
    if (!Array.isArray(issue?.path) || typeof issue.message !== 'string') return undefined;
    issues.push({ path: issue.path.join('.'), message: issue.message.slice(0, 200) });
  }
  return issues.slice(0, 5);
}

/** A gateway error that is the model's to read: answered as an `isError` tool result. */
class CallErrorResult extends Error {
  constructor(readonly wire: { code: string; message: string }) {
    super(wire.message);
  }
}

async function callTool(
  options: McpEdgeOptions,
  codec: { mint(payload: ParkedCall, ctx?: ServerContext): Promise<string> },
  tasks: McpTasks,
  era: 'legacy' | 'modern',
  params: { name: string; arguments?: Record<string, unknown> | undefined; task?: unknown },
  ctx: ServerContext,
  stopping: () => boolean,
): Promise<CallToolResult | InputRequiredResult> {
  const tool = params.name;
  const args = params.arguments ?? {};
  const auth = ctx.http?.authInfo;
  const tenant = String(auth?.extra?.tenant ?? '');
  const state = await ctx.mcpReq.requestState<ParkedCall>();
  let runId: string;
  let callId: string;
  if (state !== undefined) {
    // Sealed, unexpired and bound to this principal (the codec checked that before we ran).
    const mismatch = checkParkedCall(state, tool, args);
    if (mismatch) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        'requestState was minted for another call',
        { code: 'invalid-request', reason: mismatch },
      );
    }
    const expected = expectedDispatchId(options.registry, tenant, state, args);
    if (expected !== state.dispatchId) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        "the tool's contract changed since this call was parked: call it again",
        { code: 'invalid-request', reason: 'contract changed' },
      );
    }
    if (!(await options.consumed.consume(state.nonce))) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'requestState was already used', {
        code: 'invalid-request',
        reason: 'replayed',
      });
    }
    ({ runId, callId } = state);
    await waitForResolution(options, tenant, state, ctx.mcpReq.signal);
  } else {
    const meta = (ctx.mcpReq._meta ?? {}) as Record<string, unknown>;
    const id = randomUUID();
    runId = metaId(meta, RUN_ID_META_KEY) ?? `mcp-${id}`;
    callId = metaId(meta, CALL_ID_META_KEY) ?? id;
  }
  // A client that closes its request (its stream) cancels the call: the executor running it
  // aborts it. The id is the one the submission keys the call by: the contract is taken now, the
  // digest only if the client does close (hashing the input is most of what it costs).
  const contract = options.registry.resolve(tenant, tool);
  const signal = ctx.mcpReq.signal;
  const onAbort = () => {
    const dispatchId =
      contract && isSubjectToken(runId)
        ? dispatchKey({
            tenant,
            runId,
            callId,
            toolName: contract.name,
            contractHash: contract.contractHash,
            input: args,
          })
        : undefined;
    if (dispatchId && !stopping()) {
      options.canceller.cancel({
        tenant,
        runId,
        dispatchId,
        reason: 'the MCP client cancelled the call',
      });
    }
  };
  signal.addEventListener('abort', onAbort, { once: true });
  const wantsTask =
    (era === 'legacy' && params.task !== undefined) || (era === 'modern' && declaresTasks(ctx));
  const progress = reportProgress(ctx, options.progressIntervalMs ?? 5_000);
  let response: SubmitDispatchResponse;
  try {
    response = (await callApi(options.api, ApiOperation.SubmitDispatch, ctx, {
      runId,
      callId,
      agent: { agentType: 'mcp', label: auth?.clientId ?? 'mcp' },
      tool,
      input: args,
      // A client of tasks hears of its task after the short wait instead of the long one.
      wait: wantsTask ? options.approvalWaitMs : true,
    })) as SubmitDispatchResponse;
  } catch (err) {
    if (err instanceof CallErrorResult) {
      return {
        content: [{ type: 'text', text: `${err.wire.code}: ${err.wire.message}` }],
        isError: true,
      };
    }
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
    progress.stop();
  }
  const ids: CallIds = { dispatchId: response.dispatchId, runId, callId };
  if (wantsTask && era === 'legacy') {
    // A task-augmented call (2025-11-25) answers its task, whatever the state: the client follows
    // it with tasks/get and collects the outcome with tasks/result. The SDK's tools/call seam asks
    // for `content` beside `task`; a client of tasks reads `task`.
    const principal = options.api.auth.authenticate(`Bearer ${auth?.token ?? ''}`);
    const task = await tasks.create(principal, ids);
    return {
      task,
      content: [{ type: 'text', text: `task ${task.taskId}: ${task.status}` }],
    } as CallToolResult;
  }
  if (response.state === 'settled' && response.settled) return settledResult(ids, response.settled);
  if (wantsTask) {
    // A client of the 2026-07-28 tasks extension gets a task for a call that waits for a person
    // (or still runs) instead of `input_required`: it polls tasks/get for the result.
    const principal = options.api.auth.authenticate(`Bearer ${auth?.token ?? ''}`);
    return (await tasks.createV2(principal, ids)) as unknown as CallToolResult;
  }
  const approval =
    response.state === 'suspended'
      ? await approvalOf(options.publisher, tenant, runId, response.dispatchId)
      : undefined;
  if (era === 'legacy') return pendingResult(ids, response, approval);
  const requestState = await codec.mint(parkedCall(ids, tool, args), ctx);
  return {
    ...inputRequired({ requestState }),
    _meta: {
      'io.toolgate/pending': {
        ...ids,
        state: response.state === 'suspended' ? 'suspended' : 'running',
        ...(approval ? { approval } : {}),
      },
    },
  };
}

/** The 2026-07-28 tasks extension's identifier. */
export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** Whether a 2026-07-28 request's client declared the tasks extension in its capabilities. */
function declaresTasks(ctx: ServerContext): boolean {
  const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const capabilities = envelope[CLIENT_CAPABILITIES_META_KEY] as
    { extensions?: Record<string, unknown> } | undefined;
  return capabilities?.extensions?.[TASKS_EXTENSION_ID] !== undefined;
}

/** What `/mcp` offers of the 2025-11-25 `tasks` capability: tasks for tools/call, listed and cancellable. */
const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/**
 * A run or call id the client named in `_meta`, if it named one. One that is not a string is
 * refused (`invalid-request`) rather than replaced by a fresh id: the client meant its retries to
 * replay one call, and a fresh id each time would run the tool again on every retry.
 */
function metaId(meta: Record<string, unknown>, key: string): string | undefined {
  const value = meta[key];
  if (value === undefined || typeof value === 'string') return value;
  const refused = mcpAnswerFor(
    new ToolgateError(ErrorCode.InvalidRequest, `_meta["${key}"] must be a string`, {
      details: { key },
    }),
  );
  throw refused.error;
}

/** The dispatch id the state's call has today (a changed contract gives another one). */
function expectedDispatchId(
  registry: ToolRegistry,
  tenant: string,
  state: Pick<ParkedCall, 'runId' | 'callId' | 'tool'>,
  args: unknown,
): string | undefined {
  if (!isSubjectToken(state.runId)) return undefined;
  const tool = registry.resolve(tenant, state.tool);
  if (!tool) return undefined;
  return dispatchKey({
    tenant,
    runId: state.runId,
    callId: state.callId,
    toolName: tool.name,
    contractHash: tool.contractHash,
    input: args,
  });
}

/** The approval a parked dispatch waits for, as the journal's `suspended` names it. */
async function approvalOf(
  publisher: JournalPublisher,
  tenant: string,
  runId: string,
  dispatchId: string,
): Promise<{ key: string; expiresAt: string } | undefined> {
  const suspended = await publisher.last(tenant, runId, dispatchId, 'suspended');
  return suspended
    ? { key: suspended.event.approvalKey, expiresAt: suspended.event.expiresAt }
    : undefined;
}

/**
 * A retry of a parked call waits (bounded) for its resolution to be journaled, so a client that
 * retries at once is not answered "still parked" in a tight loop. A call that was never parked,
 * or is already resolved, does not wait.
 */
async function waitForResolution(
  options: McpEdgeOptions,
  tenant: string,
  state: ParkedCall,
  signal: AbortSignal,
): Promise<void> {
  const { publisher } = options;
  const deadline = Date.now() + options.approvalWaitMs;
  if (!(await publisher.last(tenant, state.runId, state.dispatchId, 'suspended'))) return;
  while (!signal.aborted) {
    if (await publisher.last(tenant, state.runId, state.dispatchId, 'resolved')) return;
    const left = deadline - Date.now();
    if (left <= 0) return;
    await new Promise((resolve) => setTimeout(resolve, Math.min(250, left)));
  }
}

/**
 * While a call runs, a client that asked for progress (`_meta.progressToken`) hears every
 * `intervalMs` that it still does: seconds elapsed, no total (a dispatch has no known length).
 * The SDK then answers over SSE; its notifications also keep a client's timeout from firing when
 * it resets on progress.
 */
function reportProgress(ctx: ServerContext, intervalMs: number): { stop(): void } {
  const token = (ctx.mcpReq._meta as { progressToken?: unknown } | undefined)?.progressToken;
  if ((typeof token !== 'string' && typeof token !== 'number') || intervalMs <= 0) {
    return { stop: () => undefined };
  }
  const started = Date.now();
  const timer = setInterval(() => {
    const seconds = Math.round((Date.now() - started) / 1000);
    void ctx.mcpReq
      .notify({
        method: 'notifications/progress',
        params: { progressToken: token, progress: seconds, message: `running for ${seconds} s` },
      })
      .catch(() => undefined);
  }, intervalMs);
  return { stop: () => clearInterval(timer) };
}
