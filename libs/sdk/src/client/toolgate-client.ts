import { readFileSync } from 'node:fs';
import {
  connect,
  credsAuthenticator,
  type ConnectionOptions,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import {
  PageLimit,
  ApiOperation,
  ErrorCode,
  ToolgateError,
  assertSubjectToken,
  ConfigError,
  createSubjects,
  decodeJournalEvent,
  isSubjectToken,
  parseJournalEvent,
  type AgentRef,
  type AwaitDispatchResponse,
  type DispatchOutcome,
  type DispatchValueChunk,
  type DispatchValuePart,
  type Isolation,
  type JournalEvent,
  type ListToolsResponse,
  type ResolveApprovalRequest,
  type Subjects,
  type SubmitDispatchResponse,
  type Taint,
  type RegisterToolResponse,
} from '@toolgate/contracts';
import type { ToolDef } from '@toolgate/tools';
import {
  DispatchHandleImpl,
  type DispatchHandle,
  type ResolveApprovalResult,
  type ResolveExternalOptions,
} from '../dispatch/dispatch-handle';
import { serveTool, type ServedTool, type ServeToolOptions } from '../serve/serve-tool';
import {
  serveHook,
  type HookHandler,
  type ServedHook,
  type ServeHookOptions,
} from '../serve/serve-hook';
import { type Served } from '../serve/serve-queue';
import { ApiCaller } from './api-caller';
import type {
  ApprovalDetail,
  ApprovalFilter,
  ApprovalListItem,
  ListApprovalsResponse,
} from './approval-view';

export interface ClientOptions {
  /** NATS server URL(s); ignored when `nc` is given. Default `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /**
   * The team's NATS credentials (a production broker gives each team a NATS user; an open broker
   * needs none). At most one kind: `user` and `password`, a NATS `natsToken` (not the Toolgate
   * bearer token), or a `credsFile` (JWT and nkey seed, as `nsc` writes it).
   */
  user?: string;
  password?: string;
  natsToken?: string;
  credsFile?: string;
  /**
   * Where replies to this client's requests come. Default `_INBOX_<tenant>`, which a production
   * team user must use (it may not read the shared `_INBOX.>`); works on an open broker too.
   */
  inboxPrefix?: string;
  /** An existing connection to share (its own credentials and inbox prefix); left open on `close()`. */
  nc?: NatsConnection;
  /** The deployment's subject prefix (`TOOLGATE_PREFIX`). Default `toolgate`. */
  prefix?: string;
  /**
   * The deployment's journal partitions (`TOOLGATE_JOURNAL_PARTITIONS`). Default 1. The journal
   * subjects this client follows carry the tenant's partition, so it must be the deployment's.
   */
  journalPartitions?: number;
  /** Bearer token; sent in the `Authorization` header of every API request, never logged. */
  token: string;
  /** The token's tenant: names the journal and tool subjects this client follows and serves. */
  tenant: string;
  /**
   * How long an API request may take. Default 30 s: longer than the gateway's 20 s of riding out a
   * stream leader's election, so an election costs a call latency, not an error.
   */
  requestTimeoutMs?: number;
}

/** A tool call, as `client.dispatch()` takes it. */
export interface DispatchRequest<I> {
  runId: string;
  callId: string;
  agent: AgentRef;
  input: I;
  isolation?: Isolation;
  profile?: string;
  taint?: Taint;
  /** The dispatch this call retries after a `model-retry` error. */
  retryOf?: string;
}

/**
 * How `client.approvals.resolve()` names the parked call: naming the dispatch and its run lets the
 * gateway read it straight from the journal; `inputDigest` must match the input that was asked for.
 */
export type ResolveApprovalOptions = ResolveExternalOptions &
  Pick<ResolveApprovalRequest, 'dispatchId' | 'runId' | 'inputDigest'>;

/**
 * What `registerTool` answers: the stored tool, the tenant's new toolset hash and the schema's
 * warnings (accepted, probably a mistake: an unknown keyword or format).
 */
export type RegisteredToolView = RegisterToolResponse;

/** A connected Toolgate client. Every failed call rejects with a `ToolgateError`: check `err.code`. */
export interface ToolgateClient {
  readonly tenant: string;
  readonly subjects: Subjects;
  /** Registers a ToolDef's contract and policy as a remote tool (served by `serveTool`). Needs `admin`. */
  registerTool(def: ToolDef): Promise<RegisteredToolView>;
  listTools(): Promise<ListToolsResponse>;
  /** Submits a call; with a typed ToolDef, `input` and the result are typed from its schema. */
  dispatch<I, R>(request: DispatchRequest<I> & { tool: ToolDef<I, R> }): Promise<DispatchHandle<R>>;
  dispatch(request: DispatchRequest<unknown> & { tool: string }): Promise<DispatchHandle<unknown>>;
  /**
   * A dispatch with its whole event history. A call too large to answer whole carries its largest
   * values as previews, named in `elided`: read one with {@link ToolgateClient.getDispatchValue}.
   */
  getDispatch(dispatchId: string): Promise<unknown>;
  /** One of a dispatch's values (`input`, `effectiveInput`, `result`), whole: read chunk by chunk. */
  getDispatchValue(dispatchId: string, part: DispatchValuePart): Promise<unknown>;
  /**
   * A run's status, one page of its dispatches (`nextCursor` → `page.cursor` for the next) and its
   * oldest open approvals.
   */
  getRun(runId: string, page?: { cursor?: string; limit?: number }): Promise<unknown>;
  /** Serves a remote tool on its queue group until `stop()`. */
  serveTool(def: ToolDef, options?: ServeToolOptions): ServedTool;
  /**
   * Serves the remote hook (or canUseTool) `name` of the tenant's policy until `stop()`: the
   * handler answers `'allow' | 'deny' | 'ask' | { modifiedInput } | undefined` (pass).
   */
  serveHook(name: string, handler: HookHandler, options?: ServeHookOptions): ServedHook;
  readonly approvals: {
    /**
     * Approvals matching `filter`, read page by page until `filter.limit` (default
     * `PageLimit.approvals.default`, 100) are read or
     * the list ends. Each carries a bounded preview of its input (`inputPreview`): `get` reads one
     * with all of it.
     */
    list(filter?: ApprovalFilter): Promise<ApprovalListItem[]>;
    /** One page (`filter.cursor`: the previous page's `nextCursor`). */
    listPage(filter?: ApprovalFilter): Promise<ListApprovalsResponse>;
    /** One approval with its whole input and what an approver needs to decide it. */
    get(key: string, where?: { dispatchId?: string; runId?: string }): Promise<ApprovalDetail>;
    resolve(key: string, options: ResolveApprovalOptions): Promise<ResolveApprovalResult>;
  };
  /** Stops served tools (draining their in-flight calls), abandons open handles, closes the connection it opened. */
  close(): Promise<void>;
}

/** Connects to NATS (or adopts `nc`) and returns a client for one tenant's token. */
export async function createClient(options: ClientOptions): Promise<ToolgateClient> {
  if (typeof options.token !== 'string' || options.token.length === 0) {
    throw new ConfigError('createClient: a bearer token is required');
  }
  assertSubjectToken('tenant', options.tenant);
  const subjects = createSubjects(options.prefix ?? 'toolgate', {
    ...(options.journalPartitions ? { journalPartitions: options.journalPartitions } : {}),
  });
  const owned = !options.nc;
  const nc = options.nc ?? (await connect(connectionOptions(options)));
  return new Client(
    nc,
    owned,
    subjects,
    options.tenant,
    new ApiCaller(nc, subjects, options.token, options.requestTimeoutMs ?? 30_000),
  );
}

/** The NATS connection options for a client's credentials; refuses two kinds at once. */
export function connectionOptions(options: ClientOptions): ConnectionOptions {
  const kinds = [
    options.user !== undefined || options.password !== undefined ? 'user/password' : undefined,
    options.natsToken !== undefined ? 'natsToken' : undefined,
    options.credsFile !== undefined ? 'credsFile' : undefined,
  ].filter((k) => k !== undefined);
  if (kinds.length > 1) {
    throw new ConfigError(
      `createClient: give one kind of NATS credentials, not ${kinds.join(' and ')}`,
    );
  }
  if ((options.user === undefined) !== (options.password === undefined)) {
    throw new ConfigError('createClient: `user` and `password` go together');
  }
  const inboxPrefix = options.inboxPrefix ?? `_INBOX_${options.tenant}`;
  return {
    servers: options.servers ?? 'nats://127.0.0.1:4222',
    name: `toolgate-sdk-${options.tenant}`,
    inboxPrefix,
    ...(options.user !== undefined ? { user: options.user, pass: options.password } : {}),
    ...(options.natsToken !== undefined ? { token: options.natsToken } : {}),
    ...(options.credsFile !== undefined
      ? { authenticator: credsAuthenticator(readCreds(options.credsFile)) }
      : {}),
  };
}

function readCreds(file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch {
    // The path is the caller's own; the reason (not found, no permission) is what helps.
    throw new ConfigError('createClient: the credsFile cannot be read');
  }
}

class Client implements ToolgateClient {
  private readonly handles = new Set<DispatchHandleImpl<unknown>>();
  private readonly served = new Set<Served>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    readonly subjects: Subjects,
    readonly tenant: string,
    private readonly api: ApiCaller,
  ) {}

  readonly approvals = {
    list: async (filter: ApprovalFilter = {}): Promise<ApprovalListItem[]> => {
      // The first page is asked for as given (the gateway validates the filter and its limit);
      // the next pages continue it until `limit` approvals are read or the list ends.
      const first = await this.approvals.listPage(filter);
      const rows = [...first.approvals];
      const max = typeof filter?.limit === 'number' ? filter.limit : PageLimit.approvals.default;
      let cursor = first.nextCursor ?? undefined;
      while (cursor && rows.length < max) {
        const page = await this.approvals.listPage({
          ...filter,
          limit: Math.min(max - rows.length, PageLimit.approvals.max),
          cursor,
        });
        rows.push(...page.approvals);
        cursor = page.nextCursor ?? undefined;
      }
      return rows;
    },
    listPage: (filter: ApprovalFilter = {}) =>
      this.api.call<ListApprovalsResponse>(ApiOperation.ListApprovals, filter),
    get: (key: string, where: { dispatchId?: string; runId?: string } = {}) =>
      this.api.call<ApprovalDetail>(ApiOperation.GetApproval, { key, ...where }),
    resolve: (key: string, options: ResolveApprovalOptions) =>
      this.api.call<ResolveApprovalResult>(ApiOperation.ResolveApproval, { key, ...options }),
  };

  registerTool(def: ToolDef): Promise<RegisteredToolView> {
    return this.api.call(ApiOperation.RegisterTool, {
      tool: { ...def.contract, policy: { ...def.policy, executor: 'remote' } },
    });
  }

  listTools(): Promise<ListToolsResponse> {
    return this.api.call(ApiOperation.ListTools);
  }

  getDispatch(dispatchId: string): Promise<unknown> {
    return this.api.call(ApiOperation.GetDispatch, { dispatchId });
  }

  async getDispatchValue(dispatchId: string, part: DispatchValuePart): Promise<unknown> {
    let text = '';
    let offset: number | null = 0;
    while (offset !== null) {
      const chunk = (await this.api.call(ApiOperation.GetDispatchValue, {
        dispatchId,
        part,
        offset,
      })) as DispatchValueChunk;
      text += chunk.text;
      offset = chunk.nextOffset;
    }
    return JSON.parse(text) as unknown;
  }

  getRun(runId: string, page: { cursor?: string; limit?: number } = {}): Promise<unknown> {
    return this.api.call(ApiOperation.GetRun, { runId, ...page });
  }

  dispatch<I, R>(request: DispatchRequest<I> & { tool: ToolDef<I, R> }): Promise<DispatchHandle<R>>;
  dispatch(request: DispatchRequest<unknown> & { tool: string }): Promise<DispatchHandle<unknown>>;
  async dispatch(
    request: DispatchRequest<unknown> & { tool: string | ToolDef },
  ): Promise<DispatchHandle<unknown>> {
    // Plain JavaScript callers can pass anything: refuse what is not a request before using it.
    if (typeof request !== 'object' || request === null || Array.isArray(request)) {
      throw new ToolgateError(ErrorCode.InvalidRequest, 'dispatch: expected a request object');
    }
    const { tool, ...call } = request;
    const def = typeof tool === 'object' && tool !== null ? tool : undefined;
    const toolName = typeof tool === 'string' ? tool : def?.contract?.name;
    if (typeof toolName !== 'string') {
      throw new ToolgateError(
        ErrorCode.InvalidRequest,
        'dispatch: `tool` must be a tool name or a ToolDef',
      );
    }
    if (!isSubjectToken(call.runId)) {
      throw new ToolgateError(
        ErrorCode.InvalidRequest,
        'dispatch: `runId` must be 1-128 characters of [A-Za-z0-9_-]',
      );
    }
    const risk = def?.policy?.risk;
    // Subscribe to the run BEFORE submitting: the dispatch id is only known from the reply, and a
    // fast pipeline can settle before the reply reaches us. Events are buffered until then. The
    // SUB reaches the server before the request on this same connection, so nothing is missed.
    const buffered: JournalEvent[] = [];
    let sink: ((e: JournalEvent) => void) | undefined = undefined;
    const sub: Subscription = this.nc.subscribe(
      this.subjects.journal.forRun(this.tenant, call.runId),
      {
        callback: (err, msg) => {
          if (err) return;
          const event = decodeJournalEvent(msg.data);
          if (!event) return;
          try {
            if (sink) sink(event);
            else buffered.push(event);
          } catch {
            // Whatever is published on the run's subjects, the subscription keeps serving the
            // handle: an event it cannot take is dropped.
          }
        },
      },
    );
    let reply: SubmitDispatchResponse;
    try {
      reply = await this.api.call<SubmitDispatchResponse>(ApiOperation.SubmitDispatch, {
        ...call,
        tool: toolName,
      });
    } catch (err) {
      sub.unsubscribe();
      throw err;
    }
    const handle: DispatchHandleImpl<unknown> = new DispatchHandleImpl(
      reply.dispatchId,
      call.runId,
      reply.status,
      { callId: call.callId, ...(risk ? { risk } : {}) },
      // Naming the dispatch and its run lets the gateway read the parked call from the journal
      // stream itself, so a resolution right after `approval:pending` never races the projection.
      (key, options) => this.approvals.resolve(key, { ...options, runId: call.runId }),
      () => {
        sub.unsubscribe();
        this.handles.delete(handle);
      },
      () => this.recordedOutcome(call.runId, reply.dispatchId),
      (key) => this.approvals.get(key, { dispatchId: reply.dispatchId, runId: call.runId }),
    );
    this.handles.add(handle);
    // The reply's outcome (a replay's: this client sends no `wait`) is the one the journal
    // recorded: the handle's result, whatever settlement was heard on the run's subjects (the
    // losing one of a race is heard too, and on an open broker a forgery). Without it, the handle
    // asks the gateway for the recorded one once it hears a settlement.
    if (reply.settled) handle.recorded(reply.settled);
    for (const e of buffered.splice(0)) handle.feed(e);
    sink = (e) => handle.feed(e);
    if (reply.status === 'replayed') {
      // The call's earlier events were published before we subscribed: read them from the
      // recorded history so a replay still surfaces its events (best effort: the projection may lag).
      const history = await this.getDispatch(reply.dispatchId).catch(() => undefined);
      for (const e of recordedEvents(history)) handle.feed(e);
    }
    // Last: a finished handle surfaces no more events.
    if (reply.settled) handle.finish(reply.settled);
    return handle;
  }

  /**
   * The outcome the journal recorded for a dispatch (`dispatch.await`), waiting up to half the
   * request timeout (at most 10 s) for one: null while there is none.
   */
  private async recordedOutcome(
    runId: string,
    dispatchId: string,
  ): Promise<DispatchOutcome | null> {
    const answer = await this.api.call<AwaitDispatchResponse>(ApiOperation.AwaitDispatch, {
      runId,
      dispatchId,
      wait: Math.min(10_000, Math.floor(this.api.timeoutMs / 2)),
    });
    return answer.state === 'settled' && answer.settled ? answer.settled : null;
  }

  serveTool(def: ToolDef, options?: ServeToolOptions): ServedTool {
    return this.track(serveTool(this.nc, this.subjects, this.tenant, def, options));
  }

  serveHook(name: string, handler: HookHandler, options?: ServeHookOptions): ServedHook {
    return this.track(serveHook(this.nc, this.subjects, this.tenant, name, handler, options));
  }

  /** Keeps `served` until it stops, so `close()` stops what is still served. */
  private track(served: Served): Served {
    this.served.add(served);
    return {
      subject: served.subject,
      stop: async () => {
        this.served.delete(served);
        await served.stop();
      },
    };
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.served].map((s) => s.stop()));
    this.served.clear();
    for (const h of [...this.handles]) h.abandon('the client closed before the dispatch settled');
    if (this.ownsConnection) await this.nc.drain();
  }
}

function recordedEvents(history: unknown): JournalEvent[] {
  const events = (history as { events?: { event?: unknown }[] } | undefined)?.events;
  if (!Array.isArray(events)) return [];
  return events
    .map((e) => parseJournalEvent(e?.event))
    .filter((e): e is JournalEvent => e !== null);
}
