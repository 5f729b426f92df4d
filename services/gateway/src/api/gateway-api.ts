import {
  ApiOperation,
  ErrorCode,
  NonSerializableValueError,
  GetDispatchRequestSchema,
  GetDispatchValueRequestSchema,
  GetRunRequestSchema,
  ListApprovalsRequestSchema,
  PutPolicyRequestSchema,
  RegisterToolRequestSchema,
  RegisteredToolSchema,
  ToolgateError,
  toWireError,
  type ListToolsResponse,
  type Progress,
  type WhoAmIResponse,
  type RegisterToolResponse,
  type ResetErrorCapResponse,
  ResetErrorCapRequestSchema,
} from '@toolgate/contracts';
import { context, propagation, SpanKind } from '@opentelemetry/api';
import { messagingFailure } from '@toolgate/bus';
import type { PolicyStore, ToolRegistry } from '@toolgate/registry';
import type { ErrorStreaks } from '@toolgate/bus';
import { Attr, inSpan, requestTraceId } from '@toolgate/telemetry';
import { TokenAuth, type Access, type Principal } from '../auth/token-auth';
import type { DispatchSubmitter } from '../dispatch/dispatch-submitter';
import type { ApprovalResolver } from '../approvals/approval-resolver';
import type { PolicyGate } from '../policy/policy-gate';
import type { GatewayMetrics } from './gateway-metrics';
import type { PolicyWhatIf } from '../policy/policy-whatif';
import type { JournalQueries } from './journal-queries';
import { parseRequest } from './parse-request';
import type { ScriptInstaller } from '../scripts/script-installer';
import type { McpImporter } from '../mcp/mcp-importer';
import { boundedApprovalDetail } from '../approvals/approval-detail';

/** What an edge may pass an operation besides its body. */
export interface CallOptions {
  /** Progress of a long operation (a policy what-if), for an edge that can stream it. */
  onProgress?: (progress: Progress) => void;
  /** Aborted when the caller is gone (an HTTP client that hung up): a long operation stops. */
  signal?: AbortSignal;
  /**
   * The principal `authorization` already resolved to on this request (the MCP edge's bearer
   * check): not looked up again. The operation's scope is still required of it.
   */
  principal?: Principal;
  /**
   * The W3C trace the request belongs to (set by {@link GatewayApi.call}): the gateway's span's
   * when it traces, else the one the caller's `traceparent` names; absent when there is neither.
   */
  traceId?: string;
}

/**
 * One API operation: what it needs of a token (a scope, `read`: any of dispatch/approve, or `any`)
 * and what it does. The same table serves HTTP and NATS.
 */
type Operation = {
  scope: Access;
  run(principal: Principal, body: unknown, options: CallOptions): Promise<unknown>;
};

/**
 * Every gateway operation, independent of the edge that carries it. Each one authorises the
 * principal, validates its body and throws typed errors; the HTTP controller and the NATS responder
 * only translate.
 */
export class GatewayApi {
  readonly operations: Readonly<Record<ApiOperation, Operation>>;

  constructor(
    readonly auth: TokenAuth,
    private readonly registry: ToolRegistry,
    private readonly policies: PolicyStore,
    private readonly policyGate: PolicyGate,
    private readonly submitter: DispatchSubmitter,
    /** Also the resolve-by-link pages' and the webhooks' way to read and resolve approvals. */
    readonly approvals: ApprovalResolver,
    private readonly queries: JournalQueries,
    private readonly streaks: ErrorStreaks,
    private readonly scripts: ScriptInstaller,
    private readonly whatIf: PolicyWhatIf,
    private readonly mcpImporter: McpImporter,
    /** `GATEWAY_TRACE_UI_URL`: what `whoami` tells a console to link dispatches to. */
    private readonly traceUrlTemplate: string | null,
    private readonly metrics?: GatewayMetrics,
  ) {
    this.operations = {
      [ApiOperation.RegisterTool]: { scope: 'admin', run: (p, b) => this.registerTool(p, b) },
      [ApiOperation.ListTools]: { scope: 'dispatch', run: async (p) => this.listTools(p) },
      [ApiOperation.InstallScript]: { scope: 'admin', run: (p, b) => this.scripts.install(p, b) },
      [ApiOperation.ListScripts]: { scope: 'dispatch', run: (p) => this.scripts.inventory(p) },
      [ApiOperation.SubmitDispatch]: {
        scope: 'dispatch',
        run: (p, b, o) => this.submitter.submit(p, b, o.traceId),
      },
      [ApiOperation.GetDispatch]: {
        scope: 'read',
        run: (p, b) =>
          this.queries.ask('dispatch.get', p.tenant, parseRequest(GetDispatchRequestSchema, b)),
      },
      [ApiOperation.AwaitDispatch]: {
        scope: 'read',
        run: (p, b) => this.submitter.awaitOutcome(p, b),
      },
      [ApiOperation.GetDispatchValue]: {
        scope: 'read',
        run: (p, b) =>
          this.queries.ask(
            'dispatch.value',
            p.tenant,
            parseRequest(GetDispatchValueRequestSchema, b),
          ),
      },
      [ApiOperation.GetRun]: {
        scope: 'read',
        run: (p, b) => this.queries.ask('run.get', p.tenant, parseRequest(GetRunRequestSchema, b)),
      },
      [ApiOperation.ResetErrorCap]: {
        scope: 'approve',
        run: (p, b) => this.resetErrorCap(p, b),
      },
      [ApiOperation.PutPolicy]: { scope: 'admin', run: (p, b) => this.putPolicy(p, b) },
      [ApiOperation.GetPolicy]: {
        scope: 'dispatch',
        run: async (p) => this.policies.get(p.tenant),
      },
      [ApiOperation.EvaluatePolicy]: {
        scope: 'dispatch',
        run: (p, b) => this.policyGate.evaluate(p.tenant, b),
      },
      [ApiOperation.WhatIfPolicy]: {
        scope: 'admin',
        run: (p, b, o) => this.whatIf.run(p.tenant, b, o),
      },
      [ApiOperation.ListApprovals]: {
        scope: 'read',
        run: (p, b) =>
          this.queries.ask('approvals.list', p.tenant, parseRequest(ListApprovalsRequestSchema, b)),
      },
      [ApiOperation.GetApproval]: {
        scope: 'read',
        // Bounded here, at the API every edge shares (bus, HTTP, SDK, console): the resolve-by-link
        // page reads the whole detail from the resolver.
        run: async (p, b) => boundedApprovalDetail(await this.approvals.get(p, b)),
      },
      [ApiOperation.ResolveApproval]: {
        scope: 'approve',
        run: (p, b) => this.approvals.resolve(p, b),
      },
      [ApiOperation.WhoAmI]: {
        scope: 'any',
        run: async (p) => whoAmI(p, this.traceUrlTemplate),
      },
      [ApiOperation.ImportMcpTools]: {
        scope: 'admin',
        run: (p, b) => this.mcpImporter.import(p, b),
      },
    };
  }

  /**
   * Authenticates, authorises and runs one operation inside a SERVER span, continuing the caller's
   * trace when `carrier` holds a W3C `traceparent` (HTTP headers); over NATS (no `carrier`) the
   * responder's consumer span is already the parent. Counted and timed per transport, operation
   * and answer (`ok` or the error code) for `/metrics`.
   */
  async call(
    operation: ApiOperation,
    authorization: string | undefined,
    body: unknown,
    carrier?: Record<string, string | string[] | undefined>,
    options: CallOptions = {},
  ): Promise<unknown> {
    const op = this.operations[operation];
    if (!op) throw new ToolgateError(ErrorCode.NotFound, `unknown operation ${String(operation)}`);
    const parent = carrier ? propagation.extract(context.active(), carrier) : context.active();
    const startedAt = performance.now();
    let status = 'ok';
    try {
      return await inSpan(
        `gateway ${operation}`,
        { kind: SpanKind.SERVER, parent },
        async (span) => {
          try {
            const principal = options.principal ?? this.auth.authenticate(authorization);
            span.setAttribute(Attr.Tenant, principal.tenant);
            TokenAuth.require(principal, op.scope);
            const traceId = requestTraceId(span, carrier);
            return await op.run(principal, body, traceId ? { ...options, traceId } : options);
          } catch (err) {
            // A broker that is down or refuses an oversized message is `unavailable` / `too-large`
            // on every edge this table serves, never `internal`; a request holding a value JSON
            // cannot carry (a number literal beyond ±1.8e308 parses to Infinity) is the request's
            // fault, whichever digest of it found that out.
            const typed =
              err instanceof NonSerializableValueError
                ? new ToolgateError(
                    ErrorCode.InvalidRequest,
                    `the request holds a value JSON cannot carry: ${err.message}`,
                    { ...(err.details ? { details: err.details } : {}) },
                  )
                : (messagingFailure(err, 'the message broker') ?? err);
            status = toWireError(typed).code;
            span.setAttribute(Attr.ErrorCode, status);
            throw typed;
          }
        },
      );
    } finally {
      this.metrics?.recordRequest(
        carrier ? 'http' : 'nats',
        operation,
        status,
        (performance.now() - startedAt) / 1000,
      );
    }
  }

  private async registerTool(principal: Principal, body: unknown): Promise<RegisterToolResponse> {
    const req = parseRequest(RegisterToolRequestSchema, body);
    const tool = parseRequest(RegisteredToolSchema, { ...req.tool, policy: req.tool.policy ?? {} });
    const { warnings, ...view } = await this.registry.register(principal.tenant, tool);
    return {
      ...view,
      toolsetHash: this.registry.list(principal.tenant).toolsetHash,
      warnings: [...warnings],
    };
  }

  /** Ends a run's error streak (journaled with who did it): its next dispatch is decided again. */
  private async resetErrorCap(principal: Principal, body: unknown): Promise<ResetErrorCapResponse> {
    const { runId } = parseRequest(ResetErrorCapRequestSchema, body);
    const previousFailures = await this.streaks.reset(principal.tenant, runId, principal.identity);
    return { runId, previousFailures, failures: 0 };
  }

  private listTools(principal: Principal): ListToolsResponse {
    return this.registry.list(principal.tenant);
  }

  private async putPolicy(principal: Principal, body: unknown): Promise<{ revision: number }> {
    const req = parseRequest(PutPolicyRequestSchema, body);
    const document = this.policyGate.validate(req.document);
    const revision = await this.policies.put(principal.tenant, document, req.expectedRevision);
    return { revision };
  }
}

/** Who the caller is, as its token says: what a console shows and enables. */
function whoAmI(principal: Principal, traceUrlTemplate: string | null): WhoAmIResponse {
  return {
    tenant: principal.tenant,
    identity: principal.identity,
    scopes: [...principal.scopes].sort(),
    traceUrlTemplate,
  };
}
