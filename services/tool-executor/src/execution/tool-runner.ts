import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { trace } from '@opentelemetry/api';
import { InboxRequests, type DeliveryContext, type JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  journalEvent,
  type DecidedEvent,
  type ExecutorKind,
  type ResolvedEvent,
  type Subjects,
  type ToolContext,
} from '@toolgate/contracts';
import { Attr, annotate, inSpan } from '@toolgate/telemetry';
import { runTool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import {
  decideOnDecided,
  decideOnResolved,
  type ExecutorCommand,
  type PendingCall,
} from './pending-call';
import { runRemoteTool } from './remote-executor';
import type { CallExecutor } from './call-executor';
import { callScope } from './call-scope';
import { Slots } from './slots';

/** Resolves the working directory for a call (the worktree service under worktree isolation). */
export type CwdResolver = (call: PendingCall) => Promise<string>;

export interface ToolRunnerOptions {
  nc: NatsConnection;
  subjects: Subjects;
  publisher: JournalPublisher;
  /** In-process builtins by name. */
  builtins: ReadonlyMap<string, ToolDef>;
  /** Executors that run whole calls (`subprocess`, …); one not listed is not served here. */
  executors?: Partial<Record<ExecutorKind, CallExecutor>>;
  resolveCwd: CwdResolver;
  /** Deadline for a tool that declares none. */
  defaultTimeoutMs: number;
  /** Builtins running at once; further in-process calls wait for a slot (remote calls do not). */
  inprocessSlots: number;
  /** How often a long tool run tells the broker it is still working. */
  heartbeatMs: number;
  now: () => Date;
  log?: (level: string, message: string, data?: Record<string, unknown>) => void;
  /**
   * Checks the call's input against its contract before any executor sees it (see `InputCheck`):
   * null to run, or the outcome to settle with instead.
   */
  checkInput?: (call: PendingCall) => Promise<ToolRunOutcome | null>;
}

/**
 * Runs allowed calls: journals `started`, runs the tool in its executor, journals `settled`. The
 * settlement is once per dispatch at the broker, so a redelivered decision after a crash can run
 * the tool again (at least once; the dispatch id is the tool's idempotency key) but never settles
 * twice, and a decision redelivered after settlement does not run the tool at all.
 */
export class ToolRunner {
  /** Remote tool calls: one inbox for all of them (see `InboxRequests`). */
  private readonly remote: InboxRequests;

  private readonly slots: Slots;

  constructor(private readonly options: ToolRunnerOptions) {
    this.remote = new InboxRequests(options.nc);
    this.slots = new Slots(options.inprocessSlots);
  }

  async onDecided(event: DecidedEvent, delivery: DeliveryContext): Promise<void> {
    // A first delivery of an allow decision cannot find a settlement (decided happens once, and
    // only the executor settles an allowed call): the read is spent on redeliveries only.
    await this.execute(decideOnDecided(event), delivery, delivery.deliveryCount > 1);
  }

  async onResolved(event: ResolvedEvent, delivery: DeliveryContext): Promise<void> {
    const suspended = await this.options.publisher.last(
      event.tenant,
      event.runId,
      event.dispatchId,
      'suspended',
    );
    await this.execute(decideOnResolved(event, suspended?.event ?? null), delivery, true);
  }

  private async execute(
    command: ExecutorCommand,
    delivery: DeliveryContext,
    mayBeSettled: boolean,
  ): Promise<void> {
    if (command.kind === 'ignore') return;
    const { call } = command;
    annotate({
      [Attr.DispatchId]: call.dispatchId,
      [Attr.Tool]: call.tool.name,
      [Attr.Executor]: call.tool.executor,
    });
    // Already settled (by us before a crash, or by a deny): never run the tool again.
    if (
      mayBeSettled &&
      (await this.options.publisher.last(call.tenant, call.runId, call.dispatchId, 'settled'))
    )
      return;
    if (command.kind === 'settle-denied') {
      await this.settle(
        call,
        delivery.deliveryCount,
        { ok: false, error: { code: ErrorCode.Denied, message: command.reason } },
        0,
        true,
      );
      return;
    }
    const started = Date.now();
    const outcome = await inSpan(
      `execute ${call.tool.name}`,
      {
        attributes: {
          [Attr.Tool]: call.tool.name,
          [Attr.Executor]: call.tool.executor,
          [Attr.DispatchId]: call.dispatchId,
          ...(call.tool.risk ? { [Attr.Risk]: call.tool.risk } : {}),
        },
      },
      async (span) => {
        const result = await this.runCall(call, delivery);
        span.setAttribute(Attr.Outcome, result.ok ? 'ok' : 'error');
        if (!result.ok) span.setAttribute(Attr.ErrorCode, result.error.code);
        return result;
      },
    );
    await this.settle(call, delivery.deliveryCount, outcome, Date.now() - started, false);
  }

  private async runCall(call: PendingCall, delivery: DeliveryContext): Promise<ToolRunOutcome> {
    const { publisher, now } = this.options;
    const refused = await this.options.checkInput?.(call);
    if (refused) return refused;
    let cwd: string;
    try {
      cwd = await this.options.resolveCwd(call);
    } catch (err) {
      return {
        ok: false,
        error: {
          code: ErrorCode.Unavailable,
          message: `isolation unavailable: ${(err as { message?: string }).message ?? 'unknown'}`,
        },
      };
    }
    // `started` is journaled while the tool runs (its ack is awaited before `settled`, so the stream
    // order holds): one broker round trip less on every call's path.
    const startedAck = publisher.append(
      journalEvent({
        type: 'started',
        id: `${call.dispatchId}:started:${delivery.deliveryCount}`,
        tenant: call.tenant,
        runId: call.runId,
        dispatchId: call.dispatchId,
        at: now().toISOString(),
        causationId: call.causationId,
        attempt: delivery.deliveryCount,
        toolName: call.tool.name,
        executor: call.tool.executor,
        cwd,
      }),
    );
    // Observed now so a failure is never an unhandled rejection; it is rethrown by the await below.
    startedAck.catch(() => undefined);
    const timeoutMs = call.tool.timeoutMs ?? this.options.defaultTimeoutMs;
    const heartbeat = setInterval(() => delivery.working(), this.options.heartbeatMs);
    try {
      switch (call.tool.executor) {
        case 'inprocess': {
          const def = this.options.builtins.get(call.tool.name);
          if (!def) {
            return {
              ok: false,
              error: {
                code: ErrorCode.UnknownTool,
                message: `no in-process tool named ${call.tool.name}`,
              },
            };
          }
          // The ack deadline is kept alive by the heartbeat while the call waits for a slot.
          return await this.slots.run(() =>
            callScope.run(call, () =>
              runTool(def, call.input, this.context(call, cwd), { timeoutMs }),
            ),
          );
        }
        case 'remote':
          return await runRemoteTool(this.remote, this.options.subjects, {
            dispatchId: call.dispatchId,
            tenant: call.tenant,
            runId: call.runId,
            toolName: call.tool.name,
            contractHash: call.tool.contractHash,
            input: call.input,
            agent: call.agent,
            isolation: call.isolation,
            cwd,
            deadlineMs: timeoutMs,
          });
        default: {
          const executor = this.options.executors?.[call.tool.executor];
          // Local processes load this machine like builtins do: they share the builtins' slots.
          if (executor) return await this.slots.run(() => executor.run(call, { cwd, timeoutMs }));
          return {
            ok: false,
            error: {
              code: ErrorCode.ExecutorUnregistered,
              message: `the ${call.tool.executor} executor is not served here`,
            },
          };
        }
      }
    } finally {
      clearInterval(heartbeat);
      await startedAck;
    }
  }

  private context(call: PendingCall, cwd: string): Omit<ToolContext, 'signal'> {
    const spanId = trace.getActiveSpan()?.spanContext().spanId ?? randomBytes(8).toString('hex');
    const log = this.options.log;
    return {
      runId: call.runId,
      dispatchId: call.dispatchId,
      spanId,
      agent: call.agent,
      cwd,
      isolation: call.isolation,
      log(level, message, data) {
        trace.getActiveSpan()?.addEvent('tool.log', { level, message });
        log?.(level, message, { dispatchId: call.dispatchId, ...data });
      },
    };
  }

  private async settle(
    call: PendingCall,
    attempt: number,
    outcome: ToolRunOutcome,
    durationMs: number,
    denied: boolean,
  ): Promise<void> {
    await this.options.publisher.append(
      journalEvent({
        type: 'settled',
        id: `${call.dispatchId}:settled`,
        tenant: call.tenant,
        runId: call.runId,
        dispatchId: call.dispatchId,
        at: this.options.now().toISOString(),
        causationId: call.causationId,
        toolName: call.tool.name,
        outcome: denied ? 'denied' : outcome.ok ? 'ok' : 'error',
        ...(outcome.ok ? { result: outcome.result } : { error: outcome.error }),
        durationMs,
        attempt,
        verdict: denied ? 'deny' : 'allow',
        decidedBy: call.decidedBy,
        ...(call.rule !== undefined ? { rule: call.rule } : {}),
      }),
    );
  }
}
