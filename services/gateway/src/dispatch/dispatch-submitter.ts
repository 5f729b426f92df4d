import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { JournalPublisher } from '@toolgate/bus';
import {
  dispatchKey,
  ErrorCode,
  journalEvent,
  parseJournalEvent,
  SubmitDispatchRequestSchema,
  ToolgateError,
  type DispatchOutcome,
  type DispatchState,
  type JournalEvent,
  type SettledEvent,
  type Subjects,
  type SubmitDispatchResponse,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import { Attr, annotate } from '@toolgate/telemetry';
import type { Principal } from '../auth/token-auth';
import { parseRequest } from '../api/parse-request';

/** Model-retry attempts allowed per call chain. */
export const MAX_MODEL_RETRIES = 2;

const decoder = new TextDecoder();

/**
 * Accepts a tool call: validates it, keys it by content, journals `requested` (once — the broker
 * refuses a second one for the same key) and, when asked to, waits for the outcome. A replayed call
 * gets the recorded outcome; the tool does not run again.
 */
export class DispatchSubmitter {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly registry: ToolRegistry,
    private readonly options: { waitDefaultMs: number; now: () => Date },
  ) {}

  async submit(principal: Principal, body: unknown): Promise<SubmitDispatchResponse> {
    const req = parseRequest(SubmitDispatchRequestSchema, body);
    const tool = this.registry.resolve(principal.tenant, req.tool);
    if (!tool) {
      throw new ToolgateError(ErrorCode.UnknownTool, `unknown tool ${req.tool}`, {
        details: { tool: req.tool },
      });
    }
    const retryDepth = req.retryOf
      ? await this.retryDepth(principal.tenant, req.runId, req.retryOf)
      : 0;
    const dispatchId = dispatchKey({
      tenant: principal.tenant,
      runId: req.runId,
      callId: req.callId,
      toolName: tool.name,
      contractHash: tool.contractHash,
      input: req.input,
    });
    annotate({
      [Attr.DispatchId]: dispatchId,
      [Attr.Tool]: tool.name,
      [Attr.Tenant]: principal.tenant,
    });
    const event = journalEvent({
      type: 'requested',
      id: `${dispatchId}:requested`,
      tenant: principal.tenant,
      runId: req.runId,
      dispatchId,
      at: this.options.now().toISOString(),
      causationId: null,
      callId: req.callId,
      tool: {
        name: tool.name,
        contractHash: tool.contractHash,
        needsApproval: tool.policy.needsApproval,
        executor: tool.policy.executor,
        ...(tool.policy.risk ? { risk: tool.policy.risk } : {}),
        ...(tool.policy.timeoutMs ? { timeoutMs: tool.policy.timeoutMs } : {}),
        ...(tool.policy.clearance ? { clearance: tool.policy.clearance } : {}),
      },
      input: req.input,
      agent: req.agent,
      isolation: req.isolation,
      ...(req.profile ? { profile: req.profile } : {}),
      ...(req.taint ? { taint: req.taint } : {}),
      submittedBy: principal.identity,
      ...(req.retryOf ? { retryOf: req.retryOf } : {}),
      retryDepth,
    });
    const waitMs =
      req.wait === true ? this.options.waitDefaultMs : req.wait === false ? 0 : (req.wait ?? 0);
    // Subscribe before publishing so an outcome that comes quickly is not missed.
    const watcher = waitMs > 0 ? this.watch(principal.tenant, req.runId, dispatchId) : undefined;
    try {
      const appended = await this.publisher.append(event);
      const status = appended.appended && !appended.duplicate ? 'accepted' : 'replayed';
      if (status === 'replayed') {
        const recorded = await this.publisher.last(
          principal.tenant,
          req.runId,
          dispatchId,
          'settled',
        );
        if (recorded)
          return { dispatchId, status, state: 'settled', settled: outcomeOf(recorded.event) };
        if (await this.publisher.last(principal.tenant, req.runId, dispatchId, 'suspended')) {
          const resolved = await this.publisher.last(
            principal.tenant,
            req.runId,
            dispatchId,
            'resolved',
          );
          if (!resolved) return { dispatchId, status, state: 'suspended' };
        }
      }
      if (!watcher) return { dispatchId, status, state: 'requested' };
      const seen = await watcher.next(waitMs);
      if (seen?.type === 'settled')
        return { dispatchId, status, state: 'settled', settled: outcomeOf(seen) };
      return { dispatchId, status, state: seen?.type === 'suspended' ? 'suspended' : 'requested' };
    } finally {
      watcher?.close();
    }
  }

  /** Depth of a model-retry chain; refuses a retry beyond the budget. */
  private async retryDepth(tenant: string, runId: string, retryOf: string): Promise<number> {
    const prior = await this.publisher.last(tenant, runId, retryOf, 'requested');
    if (!prior) {
      throw new ToolgateError(
        ErrorCode.InvalidRequest,
        `retryOf names no dispatch of run ${runId}`,
        { details: { retryOf } },
      );
    }
    const depth = prior.event.retryDepth + 1;
    if (depth > MAX_MODEL_RETRIES) {
      throw new ToolgateError(
        ErrorCode.ModelRetry,
        `retry budget exhausted: at most ${MAX_MODEL_RETRIES} model retries per call chain`,
        {
          details: { retryOf, depth },
        },
      );
    }
    return depth;
  }

  /** Watches a dispatch's journal subjects (JetStream publishes reach core subscribers too). */
  private watch(tenant: string, runId: string, dispatchId: string) {
    const sub: Subscription = this.nc.subscribe(
      this.subjects.journal.forKey(tenant, runId, dispatchId),
    );
    const queue: JournalEvent[] = [];
    let wake: (() => void) | undefined;
    void (async () => {
      for await (const msg of sub) {
        const event = safeParse(msg.data);
        if (event && (event.type === 'settled' || event.type === 'suspended')) {
          queue.push(event);
          wake?.();
        }
      }
    })();
    return {
      next: async (timeoutMs: number): Promise<JournalEvent | undefined> => {
        if (!queue.length) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, timeoutMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        return queue.find((e) => e.type === 'settled') ?? queue[0];
      },
      close: () => sub.unsubscribe(),
    };
  }
}

function safeParse(data: Uint8Array): JournalEvent | null {
  try {
    return parseJournalEvent(JSON.parse(decoder.decode(data)));
  } catch {
    return null;
  }
}

/** What the caller sees of a settled dispatch. */
export function outcomeOf(event: SettledEvent): DispatchOutcome {
  return {
    outcome: event.outcome,
    ...(event.result !== undefined ? { result: event.result } : {}),
    ...(event.error ? { error: event.error } : {}),
  };
}

export type { DispatchState };
