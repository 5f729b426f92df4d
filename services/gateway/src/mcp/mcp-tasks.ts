import { setTimeout as delay } from 'node:timers/promises';
import {
  ProtocolError,
  ProtocolErrorCode,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type Server,
  type ServerContext,
  type Task,
} from '@modelcontextprotocol/server';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ApiOperation,
  ErrorCode,
  outcomeOf,
  ToolgateError,
  type ListApprovalsResponse,
} from '@toolgate/contracts';
import { z } from 'zod';
import type { GatewayApi } from '../api/gateway-api';
import type { Principal } from '../auth/token-auth';
import type { DispatchCanceller } from '../dispatch/dispatch-canceller';
import { mcpAnswerFor } from './mcp-errors';
import { mintTaskId, verifyTaskId, type TaskRef } from './mcp-task-id';
import { isTerminal, taskState, type TaskFacts } from './mcp-task-status';
import { settledResult } from './mcp-tool-view';

/** What a client is told to wait between two `tasks/get`. */
const POLL_INTERVAL_MS = 1_000;
/** How often a `tasks/result` waiting for the outcome reads the journal. */
const RESULT_POLL_MS = 250;
/** Tasks per `tasks/list` page at most (fewer when the page's other approvals are not this caller's). */
const LIST_PAGE = 50;

export interface McpTasksOptions {
  api: GatewayApi;
  publisher: JournalPublisher;
  canceller: Pick<DispatchCanceller, 'cancel'>;
  /** The key task ids are sealed with: the MCP state key, shared by every gateway replica. */
  key: Uint8Array;
  /** How long a `tasks/cancel` of a running call waits to see it settle before answering. */
  cancelWaitMs: number;
}

/**
 * MCP tasks over the journal — the 2025-11-25 `tasks` capability and the 2026-07-28
 * `io.modelcontextprotocol/tasks` extension ({@link toV2} maps one to the other). A task is a
 * dispatch: its id names the dispatch and is sealed for its owner ({@link mintTaskId}); its status
 * is folded from the dispatch's journal events ({@link taskState}) each time it is asked for, and
 * its result is the dispatch's `settled` outcome. Nothing is kept in memory, so a task created on one gateway
 * replica is read, collected and cancelled on any other, and survives a restart.
 *
 * The SDK (v2) parses the task vocabulary but has no task runtime (its v1 `TaskStore` runs inside
 * the v1 `Server` only), so the task methods are registered here with the SDK's custom-method
 * seam ({@link serveTasks}); every answer is the spec's `Task` / `CallToolResult` shape.
 */
export class McpTasks {
  constructor(private readonly options: McpTasksOptions) {}

  /** The task a task-augmented `tools/call` answers with, for its (just submitted) dispatch. */
  async create(principal: Principal, ref: TaskRef): Promise<Task> {
    const task = await this.read(principal, ref);
    if (!task) throw notFound();
    return task;
  }

  async get(principal: Principal, taskId: string): Promise<Task> {
    const task = await this.read(principal, this.refOf(principal, taskId));
    if (!task) throw notFound();
    return task;
  }

  /**
   * The call's result once the task is terminal (the spec's `tasks/result` blocks until then): the
   * tool's result, or an `isError` result with the reason of a deny, a withdrawal or a failure.
   * Waits until the dispatch settles or the client gives up.
   */
  async result(principal: Principal, taskId: string, signal: AbortSignal): Promise<CallToolResult> {
    const ref = this.refOf(principal, taskId);
    const { publisher } = this.options;
    const requested = await publisher.last(
      principal.tenant,
      ref.runId,
      ref.dispatchId,
      'requested',
    );
    if (!requested) throw notFound();
    for (;;) {
      const settled = await publisher.last(principal.tenant, ref.runId, ref.dispatchId, 'settled');
      if (settled) {
        const ids = { ...ref, callId: requested.event.callId };
        return {
          ...settledResult(ids, outcomeOf(settled.event)),
          _meta: { [RELATED_TASK_META_KEY]: { taskId } },
        };
      }
      if (signal.aborted) throw signal.reason ?? new Error('aborted');
      await sleep(RESULT_POLL_MS, signal);
    }
  }

  /**
   * Cancels the call a task is. Parked: its owner denies it through the approvals path (the
   * broker's first resolution wins — a person's allow that came first stands, and the call is then
   * stopped as a running one). Running or about to run: the executor stops it (its abort path).
   * A task already terminal cannot be cancelled (`-32602`).
   */
  async cancel(principal: Principal, taskId: string): Promise<Task> {
    const ref = this.refOf(principal, taskId);
    // A call still being decided is neither parked nor running yet: wait (bounded) for the chain,
    // which parks it (then it is withdrawn) or lets it run (then it is stopped).
    await this.until(
      principal,
      ref,
      ['suspended', 'started', 'settled'],
      this.options.cancelWaitMs,
    );
    const before = await this.read(principal, ref);
    if (!before) throw notFound();
    if (isTerminal(before.status)) {
      throw protocolError(
        new ToolgateError(ErrorCode.InvalidRequest, `task is already ${before.status}`, {
          details: { status: before.status },
        }),
      );
    }
    const suspended = await this.options.publisher.last(
      principal.tenant,
      ref.runId,
      ref.dispatchId,
      'suspended',
    );
    let withdrawn = false;
    if (suspended && before.status === 'input_required') {
      try {
        await this.options.api.approvals.resolve(principal, {
          key: suspended.event.approvalKey,
          dispatchId: ref.dispatchId,
          runId: ref.runId,
          decision: 'deny',
          reason: 'withdrawn by the caller (MCP tasks/cancel)',
        });
        withdrawn = true;
      } catch (err) {
        // A resolution came first (first one wins): an allow lets it run, so stop it running.
        // Anything else — `forbidden` under separation of duties, where a submitter resolves
        // none of its own calls — is the caller's answer.
        if ((err as { code?: unknown }).code !== ErrorCode.AlreadyResolved) throw err;
      }
    }
    if (!withdrawn) {
      this.options.canceller.cancel({
        tenant: principal.tenant,
        runId: ref.runId,
        dispatchId: ref.dispatchId,
        reason: 'the MCP client cancelled the task',
      });
      await this.until(principal, ref, ['settled'], this.options.cancelWaitMs);
    }
    const after = await this.read(principal, ref);
    if (!after) throw notFound();
    return after;
  }

  /**
   * The caller's tasks that were parked for approval, newest first, from the journal's projection
   * (a task that settled without waiting for anyone is not listed). Paged by the approvals
   * listing's cursor; a page holds at most {@link LIST_PAGE} tasks.
   */
  async list(
    principal: Principal,
    token: string,
    cursor: string | undefined,
  ): Promise<{ tasks: Task[]; nextCursor?: string }> {
    let page: ListApprovalsResponse;
    try {
      page = (await this.options.api.call(
        ApiOperation.ListApprovals,
        `Bearer ${token}`,
        {
          status: 'all',
          order: 'newest',
          limit: LIST_PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        },
        {}, // an HTTP edge's call (counted as one), with no trace context of its own
      )) as ListApprovalsResponse;
    } catch (err) {
      throw protocolError(err);
    }
    const tasks = page.approvals
      .filter(
        (a) =>
          a.agent?.agentType === MCP_AGENT_TYPE &&
          a.submittedBy === principal.identity &&
          a.suspendedAt !== null,
      )
      .map((a) =>
        this.taskOf(principal, a, {
          createdAt: a.suspendedAt!,
          updatedAt: a.settled?.at ?? a.updatedAt,
          submittedBy: a.submittedBy!,
          suspended: { approvalKey: a.approvalKey, expiresAt: a.expiresAt ?? '' },
          ...(a.decision
            ? {
                resolved: {
                  decision: a.decision,
                  by: a.resolvedBy ?? '',
                  reason: a.reason ?? undefined,
                },
              }
            : {}),
          ...(a.settled
            ? {
                settled: {
                  outcome: a.settled.outcome,
                  errorCode: a.settled.errorCode ?? undefined,
                },
              }
            : {}),
        }),
      );
    return { tasks, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
  }

  /** The task (2026-07-28 tasks extension) a `tools/call` answers with: `resultType: "task"`. */
  async createV2(principal: Principal, ref: TaskRef): Promise<CreateTaskResultV2> {
    const snapshot = await this.snapshot(principal, ref);
    if (!snapshot) throw notFound();
    const { result: _result, ...task } = toV2(snapshot.task, snapshot.result);
    return { resultType: 'task', ...task };
  }

  /** `tasks/get` of the 2026-07-28 tasks extension: the task with its result once it has one. */
  async getV2(principal: Principal, taskId: string): Promise<TaskV2> {
    const snapshot = await this.snapshot(principal, this.refOf(principal, taskId));
    if (!snapshot) throw notFound();
    return toV2(snapshot.task, snapshot.result);
  }

  /** `tasks/cancel` of the 2026-07-28 tasks extension: an empty acknowledgement. */
  async cancelV2(principal: Principal, taskId: string): Promise<Record<string, never>> {
    await this.cancel(principal, taskId);
    return {};
  }

  /** The dispatch a task id names for this principal, or the typed refusal. */
  private refOf(principal: Principal, taskId: string): TaskRef {
    const ref = verifyTaskId(this.options.key, principal, taskId);
    if (!ref) throw notFound();
    return ref;
  }

  /** The task as the journal stream has it now (leader reads), or null: no such dispatch. */
  private async read(principal: Principal, ref: TaskRef): Promise<Task | null> {
    return (await this.snapshot(principal, ref))?.task ?? null;
  }

  /** The task and, once the call settled, its result (both from the stream's leader). */
  private async snapshot(
    principal: Principal,
    ref: TaskRef,
  ): Promise<{ task: Task; result?: CallToolResult } | null> {
    const last = <T extends 'requested' | 'suspended' | 'resolved' | 'settled'>(type: T) =>
      this.options.publisher.last(principal.tenant, ref.runId, ref.dispatchId, type);
    const [requested, suspended, resolved, settled] = await Promise.all([
      last('requested'),
      last('suspended'),
      last('resolved'),
      last('settled'),
    ]);
    if (!requested) return null;
    const latest = [requested, suspended, resolved, settled]
      .map((s) => s?.event.at)
      .filter((at): at is string => at !== undefined)
      .sort()
      .at(-1)!;
    const task = this.taskOf(principal, ref, {
      createdAt: requested.event.at,
      updatedAt: latest,
      submittedBy: requested.event.submittedBy,
      ...(suspended
        ? {
            suspended: {
              approvalKey: suspended.event.approvalKey,
              expiresAt: suspended.event.expiresAt,
            },
          }
        : {}),
      ...(resolved
        ? {
            resolved: {
              decision: resolved.event.decision,
              by: resolved.event.by,
              reason: resolved.event.reason,
            },
          }
        : {}),
      ...(settled
        ? {
            settled: {
              outcome: settled.event.outcome,
              errorCode: settled.event.error?.code,
            },
          }
        : {}),
    });
    if (!settled) return { task };
    const ids = { ...ref, callId: requested.event.callId };
    return { task, result: settledResult(ids, outcomeOf(settled.event)) };
  }

  private taskOf(principal: Principal, ref: TaskRef, facts: TaskFacts): Task {
    const state = taskState(facts);
    return {
      taskId: mintTaskId(this.options.key, principal, ref),
      status: state.status,
      ...(state.statusMessage ? { statusMessage: state.statusMessage } : {}),
      createdAt: facts.createdAt,
      lastUpdatedAt: facts.updatedAt,
      // A task lives as long as its dispatch is journaled: no expiry of its own.
      ttl: null,
      pollInterval: POLL_INTERVAL_MS,
    };
  }

  /** Waits up to `ms` for the dispatch to have one of `types` journaled. */
  private async until(
    principal: Principal,
    ref: TaskRef,
    types: readonly ('suspended' | 'started' | 'settled')[],
    ms: number,
  ): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = await Promise.all(
        types.map((type) =>
          this.options.publisher.last(principal.tenant, ref.runId, ref.dispatchId, type),
        ),
      );
      if (found.some((f) => f !== null)) return;
      const left = deadline - Date.now();
      if (left <= 0) return;
      await sleep(Math.min(RESULT_POLL_MS, left));
    }
  }
}

/** A task as the 2026-07-28 tasks extension has it (`ttlMs`, `pollIntervalMs`, an inline result). */
export type TaskV2 = {
  taskId: string;
  status: 'working' | 'completed' | 'cancelled';
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
  result?: CallToolResult;
};

export type CreateTaskResultV2 = Omit<TaskV2, 'result'> & { resultType: 'task' };

/**
 * A task in the 2026-07-28 extension's terms. A call waiting for a person is `working` there
 * (`input_required` would ask the client for input, and nothing it could send decides an
 * approval); a call that ended in an error result — a deny, a tool error — is `completed` with that
 * `isError` result (`failed` is for protocol faults, which a journaled call does not have).
 */
export function toV2(task: Task, result?: CallToolResult): TaskV2 {
  const status =
    task.status === 'input_required'
      ? 'working'
      : task.status === 'failed'
        ? 'completed'
        : task.status;
  return {
    taskId: task.taskId,
    status,
    ...(task.statusMessage ? { statusMessage: task.statusMessage } : {}),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttl ?? null,
    ...(task.pollInterval !== undefined ? { pollIntervalMs: task.pollInterval } : {}),
    ...(status === 'completed' && result ? { result } : {}),
  };
}

/** The agent type of every call made over MCP (the submitter records it in `requested`). */
export const MCP_AGENT_TYPE = 'mcp';

const TaskIdParams = z.looseObject({ taskId: z.string().min(1).max(1024) });
const ListParams = z.looseObject({ cursor: z.string().max(1024).optional() }).optional();

/**
 * Serves the task methods of a server instance's era, for the principal the request's bearer token
 * names: `tasks/get`, `tasks/result`, `tasks/cancel` and `tasks/list` at 2025-11-25; `tasks/get`
 * and `tasks/cancel` of the `io.modelcontextprotocol/tasks` extension at 2026-07-28.
 */
export function serveTasks(
  server: Server,
  tasks: McpTasks,
  api: GatewayApi,
  era: 'legacy' | 'modern',
): void {
  const principalOf = (ctx: ServerContext): { principal: Principal; token: string } => {
    const token = ctx.http?.authInfo?.token;
    try {
      return {
        principal: api.auth.authenticate(token ? `Bearer ${token}` : undefined),
        token: token!,
      };
    } catch (err) {
      throw protocolError(err);
    }
  };
  if (era === 'modern') {
    // The 2026-07-28 tasks extension: tasks/get (the result inline) and tasks/cancel. Its
    // tasks/update carries a client's input, which no Toolgate task asks for.
    server.setRequestHandler('tasks/get', { params: TaskIdParams }, (params, ctx) =>
      typed(tasks.getV2(principalOf(ctx).principal, params.taskId)),
    );
    server.setRequestHandler('tasks/cancel', { params: TaskIdParams }, (params, ctx) =>
      typed(tasks.cancelV2(principalOf(ctx).principal, params.taskId)),
    );
    return;
  }
  server.setRequestHandler('tasks/get', { params: TaskIdParams }, (params, ctx) =>
    typed(tasks.get(principalOf(ctx).principal, params.taskId)),
  );
  server.setRequestHandler('tasks/result', { params: TaskIdParams }, (params, ctx) =>
    typed(tasks.result(principalOf(ctx).principal, params.taskId, ctx.mcpReq.signal)),
  );
  server.setRequestHandler('tasks/cancel', { params: TaskIdParams }, (params, ctx) =>
    typed(tasks.cancel(principalOf(ctx).principal, params.taskId)),
  );
  server.setRequestHandler('tasks/list', { params: ListParams }, (params, ctx) => {
    const { principal, token } = principalOf(ctx);
    return typed(tasks.list(principal, token, params?.cursor));
  });
}

/**
 * A task method's answer with its errors mapped once, as the tools edge maps them: a gateway error
 * (a broker outage, `forbidden`) is a JSON-RPC error whose `data.code` is Toolgate's stable code.
 */
async function typed<T>(answer: Promise<T>): Promise<T> {
  try {
    return await answer;
  } catch (err) {
    throw err instanceof ProtocolError ? err : protocolError(err);
  }
}

/** The one refusal of a task id: malformed, forged, another principal's, or no such dispatch. */
function notFound(): Error {
  return protocolError(new ToolgateError(ErrorCode.NotFound, 'no such task'));
}

function protocolError(err: unknown): Error {
  const answer = mcpAnswerFor(err);
  if (answer.kind === 'protocol') return answer.error;
  // A code that a tool result would carry has no result to go in here: a JSON-RPC error with it.
  return new ProtocolError(ProtocolErrorCode.InternalError, answer.error.message, {
    code: answer.error.code,
  });
}

/** Waits `ms`, or less when `signal` aborts (never throws). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
