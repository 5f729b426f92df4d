import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  InboxRequests,
  isPublishRefused,
  serviceKeysOf,
  type DeliveryContext,
  type JournalPublisher,
  type ReadFrom,
} from '@toolgate/bus';
import {
  ErrorCode,
  isRetryableCode,
  journalEvent,
  ToolgateError,
  toWireError,
  type DecidedEvent,
  type ExecutorKind,
  type ResolvedEvent,
  type StartedEvent,
  type Subjects,
  type WireError,
} from '@toolgate/contracts';
import { Attr, annotate, inSpan } from '@toolgate/telemetry';
import { runTool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import { checkDecided, checkSuspended, type Refusal } from './call-checks';
import { decideClaim, type AttemptsView, type CurrentClaim } from './claim-rule';
import {
  decideOnDecided,
  decideOnResolved,
  type ExecutorCommand,
  type PendingCall,
} from './pending-call';
import { runRemoteTool } from './remote-executor';
import { abortedError, STOP_GRACE_MS, type CallExecutor } from './call-executor';
import { callScope } from './call-scope';
import { toolContext, type ServiceLog } from './tool-context';
import { isTransient, retryDelayMs, settledError } from './retry-rule';
import { Slots } from './slots';

/** Resolves the working directory for a call (the worktree service under worktree isolation). */
export type CwdResolver = (call: PendingCall) => Promise<string>;

/** How a delivery's claim ended (a metric label). */
export type ClaimOutcome =
  /** Claimed with nothing recorded before: the common case. */
  | 'claimed'
  /** Took over the claim of a holder presumed gone. */
  | 'took-over'
  /** Found a live claim of another holder and waited for it (counted once per delivery). */
  | 'waited'
  /** Found the dispatch settled: the tool did not run. */
  | 'settled';

/** Whether a decision's policy revision existed when it was recorded (see `PolicyRevisions`). */
export interface RevisionCheck {
  existed(tenant: string, revision: number, decidedAtMs: number): Promise<boolean>;
}

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
  /** Tools running here at once (builtins and the local executors' calls); more wait for a slot. */
  inprocessSlots: number;
  /** How often a call tells the broker it is still working (ack wait / 3). */
  heartbeatMs: number;
  /**
   * How long a claim outlives its call's deadline before another replica may take it over: time
   * for its holder to settle (the consumer's ack wait).
   */
  claimGraceMs: number;
  policyRevisions: RevisionCheck;
  now: () => Date;
  log?: ServiceLog;
  /**
   * Checks the call's input against its contract before any executor sees it (see `InputCheck`):
   * null to run, or the outcome to settle with instead.
   */
  checkInput?: (call: PendingCall) => Promise<ToolRunOutcome | null>;
  /** Called once per delivery that reached the claim (metrics). Must not throw. */
  onClaim?(outcome: ClaimOutcome): void;
  /** Called once per decision the cross-checks refused (metrics). Must not throw. */
  onRefused?(refusal: Refusal): void;
  /** Called once per run of a tool with how it ended and how long it took (metrics). Must not throw. */
  onRan?(call: PendingCall, outcome: 'ok' | 'error', seconds: number): void;
  /**
   * Told how a call ended (the run's error streak, see `ErrorStreaks`): an error or a denial
   * before its `settled` is journaled, a success while it is (see `settle`). Must not throw:
   * nothing may hold up a settlement after the side effect.
   */
  onSettling?: (call: PendingCall, outcome: 'ok' | 'error' | 'denied') => Promise<void>;
}

/** The claim this delivery holds: its `started` event and where it sits in the stream. */
interface HeldClaim {
  seq: number;
  /** When the call's deadline runs out (ms since the epoch). */
  deadlineAt: number;
}

/**
 * A delivery this replica is handling, from its first moment to its settlement: its signal fires
 * at the call's deadline (once claimed) or when the replica abandons it (a stop at its drain cap).
 */
interface Handling {
  controller: AbortController;
  /** Which dispatch it is, so a caller's cancellation finds it. */
  tenant: string;
  dispatchId: string;
  /** Resolves when the delivery's handling has ended (settled, or handed back). */
  done: Promise<void>;
}

/** The working directory, or why there is none (the call then settles with that error). */
type CwdResult = { ok: true; cwd: string } | { ok: false; error: WireError };

/**
 * Runs allowed calls, at most once per settlement and — without a crash — at most once:
 *
 * 1. Claim. The delivery appends `started` with `expect.lastSubjectSequence` = 0 on a first delivery
 *    (no read), or = the sequence of the `started` it read on a redelivery, and waits for the ack
 *    before running anything (`claim-rule.ts`). A replica that loses the claim never runs the
 *    tool: it keeps the message alive and waits for the settlement, taking over only from a holder
 *    presumed gone (the broker redelivered past its ack wait, or its lease ran out).
 * 2. Check, in parallel with the claim: the decision must match the recorded `requested` and name
 *    a policy revision that existed (`call-checks.ts`); a refused one settles as denied.
 * 3. Run, retrying a transient failure that happened before the tool could start within the
 *    call's deadline (`retry-rule.ts`); every other outcome settles at once.
 * 4. Settle (once per dispatch at the broker), retrying the publish while the message is kept
 *    alive — never nak-ing after the side effect, which would run it again without any crash.
 *
 * Only a crash between the side effect and the settlement runs a call again, once per crash; the
 * dispatch id is the tool's idempotency key for that window.
 */
export class ToolRunner {
  /** Remote tool calls: one inbox for all of them (see `InboxRequests`). */
  private readonly remote: InboxRequests;

  private readonly slots: Slots;

  /** Set by `close()`: waits and retries give up, so a stop does not hang on them. */
  private closing = false;

  /** Set by `abandon()`: what is handled now, or later, is stopped and handed back. */
  private abandoning = false;

  /** The deliveries being handled now. */
  private readonly handling = new Set<Handling>();

  constructor(private readonly options: ToolRunnerOptions) {
    this.remote = new InboxRequests(options.nc);
    this.slots = new Slots(options.inprocessSlots);
  }

  /** Stops waiting for other holders and retrying publishes (calls in flight still finish). */
  close(): void {
    this.closing = true;
  }

  /**
   * Stops every call this replica is handling and gives its message back unsettled, for another
   * replica to run: a stop that reached its drain cap. Each running tool is aborted — its process
   * tree killed (subprocess, shell), its container killed and deleted (runc; a Job deleted), its
   * script interrupted, its wait for a remote worker ended — and its message is handed back only
   * once the executor has returned, i.e. once nothing of the tool runs here any more: the claim's
   * takeover by the redelivery can never overlap it. A call that finished meanwhile settles as
   * usual. Resolves when every delivery handled here has been settled or handed back.
   */
  async abandon(): Promise<void> {
    this.closing = true;
    this.abandoning = true;
    const all = [...this.handling];
    for (const handling of all) handling.controller.abort(new Abandoned());
    await Promise.all(all.map((handling) => handling.done));
  }

  /**
   * Stops a call this replica is running because its caller gave up: its abort path runs (a
   * process tree killed, a container deleted, a wait for a remote worker ended) and it settles
   * `cancelled`. Returns whether one was running here (replicas that do not run it ignore it).
   */
  cancel(tenant: string, dispatchId: string, reason: string): boolean {
    let found = false;
    for (const handling of this.handling) {
      if (handling.tenant !== tenant || handling.dispatchId !== dispatchId) continue;
      handling.controller.abort(new ToolgateError(ErrorCode.Cancelled, reason));
      found = true;
    }
    return found;
  }

  async onDecided(event: DecidedEvent, delivery: DeliveryContext): Promise<void> {
    const command = decideOnDecided(event);
    if (command.kind !== 'run' || this.offItsSubject(event, delivery)) return;
    const { publisher, policyRevisions } = this.options;
    // Read while the claim is appended: the checks cost no latency on the happy path.
    const checks = Promise.all([
      publisher.last(event.tenant, event.runId, event.dispatchId, 'requested'),
      policyRevisions.existed(event.tenant, event.policyRevision, storedAtMs(delivery)),
    ]).then(([requested, revisionExisted]) =>
      checkDecided(event, {
        requested: requested?.event ?? null,
        revisionExisted,
      }),
    );
    await this.execute(command, 'decided', delivery, checks);
  }

  async onResolved(event: ResolvedEvent, delivery: DeliveryContext): Promise<void> {
    if (this.offItsSubject(event, delivery)) return;
    const { publisher, policyRevisions } = this.options;
    const [suspended, requested] = await Promise.all([
      publisher.last(event.tenant, event.runId, event.dispatchId, 'suspended'),
      publisher.last(event.tenant, event.runId, event.dispatchId, 'requested'),
    ]);
    const command = decideOnResolved(event, suspended?.event ?? null);
    if (command.kind === 'ignore' || !suspended) return;
    if (command.kind === 'settle-denied') {
      await this.settle(command.call, delivery.deliveryCount, {
        outcome: 'denied',
        error: { code: ErrorCode.Denied, message: command.reason },
        durationMs: 0,
      });
      return;
    }
    const checks = policyRevisions
      .existed(event.tenant, suspended.event.policyRevision, suspended.storedAt.getTime())
      .then((revisionExisted) =>
        checkSuspended(suspended.event, {
          requested: requested?.event ?? null,
          revisionExisted,
        }),
      );
    await this.execute(command, 'resolved', delivery, checks);
  }

  private async execute(
    command: Extract<ExecutorCommand, { kind: 'run' }>,
    source: ClaimSource,
    delivery: DeliveryContext,
    checks: Promise<Refusal | null>,
  ): Promise<void> {
    const { call } = command;
    annotate({
      [Attr.DispatchId]: call.dispatchId,
      [Attr.Tool]: call.tool.name,
      [Attr.Executor]: call.tool.executor,
    });
    // Observed now so a failure is never an unhandled rejection; it is rethrown where awaited.
    checks.catch(() => undefined);
    if (this.abandoning) {
      // Pulled before the stop, taken after it gave up: another replica runs it.
      delivery.handBack();
      return;
    }
    const timeoutMs = call.tool.timeoutMs ?? this.options.defaultTimeoutMs;
    const controller = new AbortController();
    const { signal } = controller;
    let handled!: () => void;
    const handling: Handling = {
      controller,
      tenant: call.tenant,
      dispatchId: call.dispatchId,
      done: new Promise<void>((resolve) => (handled = resolve)),
    };
    this.handling.add(handling);
    let deadline: NodeJS.Timeout | undefined;
    // From the first moment to the settlement — claim, waits, retries, the slot, the run — the
    // message is kept alive, so the broker redelivers it only if this replica is gone.
    const heartbeat = setInterval(() => delivery.working(), this.options.heartbeatMs);
    try {
      const handlingDeadline = Date.now() + timeoutMs;
      // An input its contract refuses runs nowhere (the check is the same on every replica): it
      // settles without a claim, and no `started` says otherwise.
      const invalid = await this.checkInput(call, handlingDeadline, signal);
      if (handedBack(signal, delivery)) return;
      if (invalid) {
        await this.settle(call, delivery.deliveryCount, {
          outcome: 'error',
          error: invalid,
          durationMs: 0,
        });
        return;
      }
      // A worktree is acquired only for a call that passed the checks: a forged decision must not
      // make the worktree service create trees. Other isolations need no round trip.
      const cwd =
        typeof call.isolation === 'object'
          ? checks.then((refusal) =>
              refusal ? noCwd(refusal) : this.resolveCwd(call, handlingDeadline, signal),
            )
          : this.resolveCwd(call, handlingDeadline, signal);
      cwd.catch(() => undefined);
      const claim = await this.claim(call, source, delivery, cwd, timeoutMs, signal);
      if (!claim) return;
      // The call's deadline stops it wherever it is — waiting for a slot, retrying, running — so
      // it ends within its claim's lease, and another replica never takes over a live run.
      deadline = setTimeout(
        () =>
          controller.abort(
            new ToolgateError(
              ErrorCode.Timeout,
              `${call.tool.name} did not finish within ${timeoutMs} ms`,
            ),
          ),
        Math.max(0, claim.deadlineAt - Date.now()),
      );
      const refusal = await checks;
      if (refusal) {
        this.refuse(call, refusal);
        await this.settle(call, delivery.deliveryCount, {
          outcome: 'denied',
          error: {
            code: ErrorCode.Denied,
            message: `refused: the decision does not match the recorded request (${refusal})`,
            details: { refused: refusal, retryable: false },
          },
          durationMs: 0,
        });
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
          const where = await cwd;
          const result: ToolRunOutcome = where.ok
            ? stoppedAs(
                await this.runWithRetries(call, where.cwd, claim.deadlineAt, signal),
                signal,
              )
            : { ok: false, error: where.error };
          span.setAttribute(Attr.Outcome, result.ok ? 'ok' : 'error');
          if (!result.ok) span.setAttribute(Attr.ErrorCode, result.error.code);
          return result;
        },
      );
      const durationMs = Date.now() - started;
      if (isAbandoned(signal) && !outcome.ok && outcome.error.code === ErrorCode.Cancelled) {
        // Stopped by the abandon and nothing of it runs any more: not settled here; handed back,
        // the redelivery takes the claim over and runs the call again (the at-least-once window
        // of a crash, which the dispatch id keys). A call that finished meanwhile settles.
        delivery.handBack();
        return;
      }
      this.ran(call, outcome.ok ? 'ok' : 'error', durationMs);
      await this.settle(call, delivery.deliveryCount, {
        outcome: outcome.ok ? 'ok' : 'error',
        ...(outcome.ok ? { result: outcome.result } : { error: outcome.error }),
        durationMs,
      });
    } finally {
      clearInterval(heartbeat);
      clearTimeout(deadline);
      this.handling.delete(handling);
      handled();
    }
  }

  /**
   * Claims the call for this delivery (see `claim-rule.ts`), waiting while another holder's claim
   * is live. Null: the dispatch is settled, and the tool must not run.
   */
  private async claim(
    call: PendingCall,
    source: ClaimSource,
    delivery: DeliveryContext,
    cwd: Promise<CwdResult>,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<HeldClaim | null> {
    const leaseMs = timeoutMs + this.options.claimGraceMs;
    const first = delivery.deliveryCount === 1;
    // A first delivery claims without reading: nothing can have claimed a decision nobody was
    // handed before. Whether the dispatch was settled by someone else (a dead-lettered event
    // settles it) is read meanwhile, and looked at before anything runs.
    const settledMeanwhile = first ? this.isSettled(call, 'leader') : undefined;
    settledMeanwhile?.catch(() => undefined);
    let view: AttemptsView | null = first ? { settled: false, started: null } : null;
    let waited = false;
    const claimNonce = randomBytes(4).toString('hex');
    for (;;) {
      view ??= await this.readAttempts(call);
      const step = decideClaim(view, {
        causationId: call.causationId,
        deliveryCount: delivery.deliveryCount,
        nowMs: Date.now(),
        leaseMs,
      });
      view = null;
      if (step.kind === 'settled') {
        this.report('settled');
        return null;
      }
      if (step.kind === 'wait') {
        if (!waited) this.report('waited');
        waited = true;
        if (handedBack(signal, delivery)) return null;
        if (this.closing) throw new Error('stopping while another replica holds the call');
        // Looked at again well before the lease ends, to ack as soon as the holder settles.
        const pause = Math.min(Math.max(step.untilMs - Date.now(), 0), this.options.heartbeatMs);
        await sleep(pause, signal);
        continue;
      }
      const where = await cwd;
      // Not claimed yet: nothing to stop, and the redelivery claims as a first holder would.
      if (handedBack(signal, delivery)) return null;
      const appended = await this.appendClaim(
        journalEvent({
          type: 'started',
          // Unique per claim: a retried append of this one is deduplicated (and answers with its
          // sequence), another delivery's never is — even a recreated consumer's, which counts
          // its deliveries from 1 again.
          id: `${call.dispatchId}:started:${source}:${delivery.deliveryCount}:${claimNonce}`,
          tenant: call.tenant,
          runId: call.runId,
          dispatchId: call.dispatchId,
          at: this.options.now().toISOString(),
          causationId: call.causationId,
          attempt: delivery.deliveryCount,
          toolName: call.tool.name,
          executor: call.tool.executor,
          ...(where.ok ? { cwd: where.cwd } : {}),
        }),
        step.expectSeq,
      );
      if (appended === null) continue; // lost the race: read what won
      // On a redelivery the holder taken over may have settled between the read and the claim
      // (it was alive after all): read once more, on this rare path only.
      if (await (settledMeanwhile ?? this.isSettled(call))) {
        this.report('settled');
        return null;
      }
      this.report(waited || step.takeover ? 'took-over' : 'claimed');
      return { seq: appended, deadlineAt: Date.now() + timeoutMs };
    }
  }

  /** Appends a claim; the sequence it got, or null when the compare-and-set lost. */
  private async appendClaim(started: StartedEvent, expectSeq: number): Promise<number | null> {
    for (let failures = 1; ; failures++) {
      try {
        const result = await this.options.publisher.append(started, {
          lastSubjectSequence: expectSeq,
        });
        return result.appended ? result.seq : null;
      } catch (err) {
        // Nothing ran yet: a broker hiccup is retried (the same id: an append that did land is
        // deduplicated and answers with its sequence), for as long as the delivery is kept alive.
        if (this.closing || this.options.nc.isClosed() || isPublishRefused(err)) throw err;
        await sleep(retryDelayMs(failures));
      }
    }
  }

  /** The dispatch's settlement and current claim, as the journal holds them now. */
  private async readAttempts(call: PendingCall): Promise<AttemptsView> {
    const [settled, { stored: started, head }] = await Promise.all([
      this.isSettled(call),
      this.options.publisher.lastWithHead(call.tenant, call.runId, call.dispatchId, 'started'),
    ]);
    if (settled) return { settled, started: null };
    if (started) {
      return {
        settled,
        started: {
          seq: started.seq,
          causationId: started.event.causationId,
          attempt: started.event.attempt,
          storedAtMs: started.storedAt.getTime(),
        },
      };
    }
    // Something may sit there that cannot be read as a claim: it is superseded only by a
    // compare-and-set on its sequence — at once when nobody who writes claims signed it (a
    // forgery), once its lease has run out when a producer did (a release this one cannot read).
    const unreadable: CurrentClaim | null = head
      ? {
          seq: head.seq,
          causationId: null,
          attempt: 0,
          storedAtMs: head.storedAt.getTime(),
          ...(head.signed ? {} : { forged: true }),
        }
      : null;
    return { settled, started: unreadable };
  }

  /**
   * Whether the dispatch is settled. `leader` where the answer is almost always "no" (a first
   * delivery): a replica's "no" would be confirmed with the leader anyway.
   */
  private async isSettled(call: PendingCall, from?: ReadFrom): Promise<boolean> {
    const settled = await this.options.publisher.last(
      call.tenant,
      call.runId,
      call.dispatchId,
      'settled',
      from ? { from } : {},
    );
    return settled !== null;
  }

  /**
   * The input checked against the call's contract: null when it may run, else the (permanent)
   * error to settle with. A contract that cannot be read right now is retried within `deadlineAt`.
   */
  private async checkInput(
    call: PendingCall,
    deadlineAt: number,
    signal: AbortSignal,
  ): Promise<WireError | null> {
    const check = this.options.checkInput;
    if (!check) return null;
    const checked = await this.retryTransient(
      async () => {
        const refused = await check(call);
        if (refused && !refused.ok && isRetryableCode(refused.error.code))
          throw new ToolgateError(refused.error.code, refused.error.message, { retryable: true });
        return refused;
      },
      deadlineAt,
      signal,
    );
    if (!checked.ok) return checked.error;
    const refused = checked.value;
    return refused && !refused.ok ? settledError(refused.error, { retryable: false }) : null;
  }

  /** The call's working directory, retrying a transient failure within `deadlineAt`. */
  private async resolveCwd(
    call: PendingCall,
    deadlineAt: number,
    signal: AbortSignal,
  ): Promise<CwdResult> {
    const resolved = await this.retryTransient(
      () => this.options.resolveCwd(call),
      deadlineAt,
      signal,
    );
    return resolved.ok ? { ok: true, cwd: resolved.value } : resolved;
  }

  /**
   * Runs the call, retrying a failure from before the tool could start within `deadlineAt`;
   * `signal` stops it (the outcome is then its reason, or the executor's `cancelled`).
   */
  private async runWithRetries(
    call: PendingCall,
    cwd: string,
    deadlineAt: number,
    signal: AbortSignal,
  ): Promise<ToolRunOutcome> {
    const ran = await this.retryTransient(
      () => this.runCall(call, cwd, deadlineAt, signal),
      deadlineAt,
      signal,
    );
    // A failure it threw is the executor's (marked with its kind); an outcome is the tool's own,
    // passed on as the tool returned it (its code says its kind).
    return ran.ok ? ran.value : ran;
  }

  /**
   * Calls `attempt` until it resolves, a failure is permanent, or no try fits before `deadlineAt`
   * any more. A thrown failure is one from before the tool could start (see `retry-rule.ts`).
   */
  private async retryTransient<T>(
    attempt: () => Promise<T>,
    deadlineAt: number,
    signal: AbortSignal,
  ): Promise<{ ok: true; value: T } | { ok: false; error: WireError }> {
    /** The last try's failure, when every try so far failed before the tool could start. */
    let failed: { wire: WireError; attempts: number } | undefined;
    /** A transient failure that is not tried again: `exhausted` unless the executor is closing. */
    const retriedOut = (wire: WireError, attempts: number, exhausted: boolean) => ({
      ok: false as const,
      error: settledError(wire, { retryable: true, attempts, exhausted }),
    });
    // The deadline came while the call was still being retried: that failure, exhausted, says
    // more than the timeout (the tool never started). An abandon stays an abandon.
    const stopped = () =>
      failed && isDeadline(signal)
        ? retriedOut(failed.wire, failed.attempts, true)
        : { ok: false as const, error: abortedError(signal) };
    for (let attempts = 1; ; attempts++) {
      try {
        signal.throwIfAborted();
        return { ok: true, value: await attempt() };
      } catch (err) {
        // Stopped (the deadline, an abandon): not a failure to retry, whatever it threw.
        if (signal.aborted) return stopped();
        const wire = toWireError(err);
        if (!isTransient(err))
          return { ok: false, error: settledError(wire, { retryable: false }) };
        // The last pause is cut short so one more try still has some of the deadline left.
        const left = deadlineAt - Date.now() - LAST_TRY_MS;
        const delay = Math.min(retryDelayMs(attempts), left);
        if (this.closing || delay <= 0) return retriedOut(wire, attempts, !this.closing);
        failed = { wire, attempts };
        await sleep(delay, signal);
      }
    }
  }

  /**
   * Runs the call once in its executor. Returns the tool's outcome; throws only a failure from
   * before the tool could start (no worker received the call), which the runner may retry.
   */
  private async runCall(
    call: PendingCall,
    cwd: string,
    deadlineAt: number,
    signal: AbortSignal,
  ): Promise<ToolRunOutcome> {
    // What is left of the deadline when the tool starts (a slot may have been waited for).
    const left = () => Math.max(1, deadlineAt - Date.now());
    switch (call.tool.executor) {
      case 'inprocess': {
        const def = this.options.builtins.get(call.tool.name);
        if (!def) {
          return {
            ok: false,
            error: settledError(
              {
                code: ErrorCode.UnknownTool,
                message: `no in-process tool named ${call.tool.name}`,
              },
              { retryable: false },
            ),
          };
        }
        // The ack deadline is kept alive by the heartbeat while the call waits for a slot.
        return await this.slots.run(
          () =>
            callScope.run(call, () =>
              runTool(def, call.input, toolContext(call, cwd, this.options.log, signal), {
                timeoutMs: left(),
                stopGraceMs: STOP_GRACE_MS,
              }),
            ),
          signal,
        );
      }
      case 'remote':
        return await runRemoteTool(
          this.remote,
          this.options.subjects,
          {
            dispatchId: call.dispatchId,
            tenant: call.tenant,
            runId: call.runId,
            toolName: call.tool.name,
            contractHash: call.tool.contractHash,
            input: call.input,
            agent: call.agent,
            isolation: call.isolation,
            cwd,
            deadlineMs: left(),
          },
          serviceKeysOf(this.options.nc).toolRequestKey,
          signal,
        );
      default: {
        const executor = this.options.executors?.[call.tool.executor];
        // Local processes load this machine like builtins do: they share the builtins' slots.
        // An executor resolves only once nothing of its call runs any more (see `CallExecutor`).
        if (executor) {
          return await this.slots.run(
            () => executor.run(call, { cwd, timeoutMs: left(), signal }),
            signal,
          );
        }
        return {
          ok: false,
          error: settledError(
            {
              code: ErrorCode.ExecutorUnregistered,
              message: `the ${call.tool.executor} executor is not served here`,
            },
            { retryable: false },
          ),
        };
      }
    }
  }

  /**
   * Journals the dispatch's outcome (once per dispatch at the broker: a settlement already there
   * wins). A failed publish is retried while the message is kept alive — after the side effect, a
   * nak would make another replica run the call again without any crash. An outcome the broker
   * refuses for what it is (too large for a message) settles as an `internal` error instead, and
   * one that cannot be encoded (nested too deep for the stack) as `non-serializable-result`.
   */
  private async settle(
    call: PendingCall,
    attempt: number,
    outcome: Pick<SettledFields, 'outcome' | 'result' | 'error' | 'durationMs'>,
  ): Promise<void> {
    // A failure raises the run's streak before the caller can see it, so the run's next dispatch
    // is judged on it. A success only ends a streak, and is recorded while the settlement is
    // journaled rather than before it, off the dispatch's path (in the common case it is one read
    // that finds the streak at zero and writes nothing): a dispatch of the run that races this
    // settlement may still read the streak from before it — refused, never let through, by it.
    const streak =
      outcome.outcome === 'ok'
        ? this.options.onSettling?.(call, outcome.outcome)
        : await this.options.onSettling?.(call, outcome.outcome);
    try {
      await this.journalSettled(call, attempt, outcome);
    } finally {
      await streak;
    }
  }

  private async journalSettled(
    call: PendingCall,
    attempt: number,
    outcome: Pick<SettledFields, 'outcome' | 'result' | 'error' | 'durationMs'>,
  ): Promise<void> {
    const event = (fields: typeof outcome) =>
      journalEvent({
        type: 'settled',
        id: `${call.dispatchId}:settled`,
        tenant: call.tenant,
        runId: call.runId,
        dispatchId: call.dispatchId,
        at: this.options.now().toISOString(),
        causationId: call.causationId,
        toolName: call.tool.name,
        ...fields,
        attempt,
        verdict: fields.outcome === 'denied' ? 'deny' : 'allow',
        decidedBy: call.decidedBy,
        ...(call.rule !== undefined ? { rule: call.rule } : {}),
      });
    let settled = event(outcome);
    let fellBack = false;
    for (let failures = 1; ; failures++) {
      try {
        // `{ appended: false }`: settled before (by another attempt or service) — done. Kept out
        // by forgeries on an open broker (`SUPERSEDE_ATTEMPTS`), the append throws, and is retried
        // below as a failed publish is, while the message is kept alive.
        await this.options.publisher.append(settled);
        return;
      } catch (err) {
        const unrecordable = unrecordableAs(err);
        if (unrecordable) {
          // Refused for what it is (a result too large for a message), or not encodable at all:
          // retrying it unchanged fails the same way, so the call settles as an error that says so.
          if (fellBack) throw err;
          fellBack = true;
          this.options.log?.('error', 'the outcome could not be journaled; settling an error', {
            dispatchId: call.dispatchId,
            error: `${(err as Error).name}: ${(err as Error).message}`,
          });
          settled = event({
            outcome: 'error',
            error: { ...unrecordable, details: { retryable: false } },
            durationMs: outcome.durationMs,
          });
          continue;
        }
        if (this.closing || this.options.nc.isClosed()) throw err;
        this.options.log?.('warn', 'settling failed; retrying', {
          dispatchId: call.dispatchId,
          failures,
        });
        await sleep(retryDelayMs(failures));
      }
    }
  }

  /**
   * Whether the event came on a subject other than the one its own fields name. Such an event is
   * refused and dropped without touching the dispatch it names: settling that one would let anyone
   * who may publish somewhere settle a dispatch anywhere (another tenant's included).
   */
  private offItsSubject(event: DecidedEvent | ResolvedEvent, delivery: DeliveryContext): boolean {
    const own = this.options.subjects.journal.event(
      event.tenant,
      event.runId,
      event.dispatchId,
      event.type,
    );
    if (delivery.msg.subject === own) return false;
    this.refuse({ dispatchId: event.dispatchId, tenant: event.tenant }, 'subject');
    return true;
  }

  private refuse(call: Pick<PendingCall, 'dispatchId' | 'tenant'>, refusal: Refusal): void {
    this.options.log?.('warn', `refused a decision that does not match its request: ${refusal}`, {
      dispatchId: call.dispatchId,
      tenant: call.tenant,
    });
    try {
      this.options.onRefused?.(refusal);
    } catch {
      // Metrics never change what happens to a call.
    }
  }

  private ran(call: PendingCall, outcome: 'ok' | 'error', durationMs: number): void {
    try {
      this.options.onRan?.(call, outcome, durationMs / 1000);
    } catch {
      // Metrics never change what happens to a call.
    }
  }

  private report(outcome: ClaimOutcome): void {
    try {
      this.options.onClaim?.(outcome);
    } catch {
      // Metrics never change what happens to a call.
    }
  }
}

/**
 * The error a settlement is replaced with when its event can never be appended as it is, or
 * undefined for a failure that may pass on a retry (the broker's). Never appendable: one the
 * broker refuses for what it is (over `max_payload` or the stream's message size), and one that
 * cannot even be encoded — `JSON.stringify` throws a RangeError on a value nested too deep for the
 * stack (or a string too long) and a TypeError on a cycle or a bigint, raised in this process, the
 * same on every try.
 */
function unrecordableAs(err: unknown): Pick<WireError, 'code' | 'message'> | undefined {
  if (isPublishRefused(err)) {
    return {
      code: ErrorCode.Internal,
      message: 'the call ended, but its outcome could not be recorded (too large?)',
    };
  }
  if (err instanceof RangeError || err instanceof TypeError) {
    return {
      code: ErrorCode.NonSerializableResult,
      message: 'the call ended, but its outcome could not be encoded as JSON',
    };
  }
  return undefined;
}

/** The least of its deadline a retried attempt is started with. */
const LAST_TRY_MS = 100;

/** Which consumer delivered the authorisation: a `started` id names it, so claims never collide. */
type ClaimSource = 'decided' | 'resolved';

/** The fields of a settlement that differ by outcome. */
type SettledFields = {
  outcome: 'ok' | 'error' | 'denied';
  result?: unknown;
  error?: WireError;
  durationMs: number;
};

/** Why an abandoned call was stopped (a stop at its drain cap). */
class Abandoned extends ToolgateError {
  constructor() {
    super(
      ErrorCode.Cancelled,
      'the executor is stopping: the call is handed back to run elsewhere',
      { retryable: true },
    );
  }
}

/** Whether `signal` fired because the replica abandoned its call (a reason made in this process). */
function isAbandoned(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof Abandoned;
}

/** Whether `signal` fired because the call's deadline came (the runner's `timeout` reason). */
function isDeadline(signal: AbortSignal): boolean {
  return (
    signal.aborted &&
    signal.reason instanceof ToolgateError &&
    signal.reason.code === ErrorCode.Timeout
  );
}

/**
 * When the replica abandoned the call, hands its message back unsettled for another replica to run
 * and says so; otherwise does nothing. For the moments nothing of the call runs here: before the
 * claim, and while another holder's claim is waited on.
 */
function handedBack(signal: AbortSignal, delivery: DeliveryContext): boolean {
  if (!isAbandoned(signal)) return false;
  delivery.handBack();
  return true;
}

/**
 * The outcome of a run the runner's signal stopped, as the signal's reason says: an executor
 * reports a stop it did not ask for as `cancelled`, which at the call's deadline is a `timeout`
 * (its details, e.g. the output's tails, kept). Any other outcome is the tool's own.
 */
function stoppedAs(outcome: ToolRunOutcome, signal: AbortSignal): ToolRunOutcome {
  if (outcome.ok || !signal.aborted || outcome.error.code !== ErrorCode.Cancelled) return outcome;
  const reason = abortedError(signal);
  if (reason.code === ErrorCode.Cancelled) return outcome;
  return { ok: false, error: { ...outcome.error, code: reason.code, message: reason.message } };
}

/** No working directory for a refused call: nothing will run in it. */
function noCwd(refusal: Refusal): CwdResult {
  return { ok: false, error: { code: ErrorCode.Denied, message: `refused (${refusal})` } };
}

/** When the broker stored the delivered event (ms since the epoch, broker clock). */
function storedAtMs(delivery: DeliveryContext): number {
  return Number(BigInt(delivery.msg.info.timestampNanos) / 1_000_000n);
}

/** Waits `ms`, or less when `signal` fires (the caller looks at it after). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
