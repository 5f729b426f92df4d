import {
  approvalKey,
  canonicalDigest,
  ErrorCode,
  inputDigest,
  outcomeOf,
  ToolgateError,
  type ApprovalDetail,
  type DispatchOutcome,
  type JournalEvent,
  type ResolvedEvent,
  type SettledEvent,
  type SuspendedEvent,
  type WireError,
} from '@toolgate/contracts';
import {
  toDispatchEvent,
  type CallFacts,
  type DispatchEvent,
  type DispatchEventName,
  type DispatchEvents,
} from './tool-events';

/** A settled outcome with the tool's result typed when the dispatch named a typed ToolDef. */
export type TypedDispatchOutcome<R = unknown> =
  | { outcome: 'ok'; result: R; error?: undefined }
  | { outcome: 'error' | 'denied'; result?: undefined; error: WireError };

/** How an approval is resolved from a handle (the decision fails closed: only `allow` allows). */
export interface ResolveExternalOptions {
  decision: 'allow' | 'deny' | (string & {});
  reason?: string;
}

/** What a resolution call answers: the `resolved` event that won. */
export interface ResolveApprovalResult {
  resolved: ResolvedEvent;
}

/** A live dispatch: its id, its outcome, its events, and a way to answer its approval. */
export interface DispatchHandle<R = unknown> {
  readonly dispatchId: string;
  readonly runId: string;
  readonly callId: string;
  /** `replayed`: this exact call was journaled before; `result` is the recorded outcome. */
  readonly status: 'accepted' | 'replayed';
  /** Resolves with the settled outcome; rejects (code `cancelled`) if the client closes first. */
  readonly result: Promise<TypedDispatchOutcome<R>>;
  /**
   * Listens for an event. Events that already happened are delivered to a late listener too (on
   * the next microtask), so a listener added right after `await client.dispatch()` misses nothing.
   */
  on<E extends DispatchEventName>(event: E, listener: (payload: DispatchEvents[E]) => void): this;
  off<E extends DispatchEventName>(event: E, listener: (payload: DispatchEvents[E]) => void): this;
  /** Resolves this dispatch's approval (`key` from `approval:pending`). Needs the `approve` scope. */
  resolveExternal(key: string, options: ResolveExternalOptions): Promise<ResolveApprovalResult>;
}

type Listener = (payload: DispatchEvent) => void;

/**
 * Asks the gateway for the outcome the journal recorded for the dispatch (`dispatch.await`,
 * which waits a while for one): null while it records none. A rejection with a retryable code
 * (`unavailable`, `timeout`, `not-found` while a replica has not applied the call yet) is asked
 * again after a pause; any other fails the result with it.
 */
export type RecordedOutcomeReader = () => Promise<DispatchOutcome | null>;

/**
 * Reads the approval the journal recorded for the dispatch under `key` (`approvals.get` naming the
 * dispatch and its run: read from the stream and verified by the gateway); rejects `not-found`
 * while none is recorded under that key.
 */
export type RecordedApprovalReader = (key: string) => Promise<ApprovalDetail>;

/** Pauses before asking again after a failure: 100 ms doubling to 5 s. */
const RETRY_PAUSES_MS = [100, 200, 400, 800, 1600, 3200, 5000];

/** The least time between two asks: an answer that came back at once does not make a busy loop. */
const MIN_ASK_INTERVAL_MS = 250;

/**
 * How long a finished handle still listens for the settlement it finished with, when the gateway
 * answered before the run's subjects carried it (it is published before it is stored, so this is
 * rare): its `tool:end` is surfaced if it comes meanwhile.
 */
const END_GRACE_MS = 2_000;

/** Settlements heard and kept for matching with the recorded outcome, at most (the first ones). */
const MAX_HEARD_SETTLED = 32;

/** Codes an ask is made again after. */
const RETRIED_CODES: ReadonlySet<string> = new Set([
  ErrorCode.Unavailable,
  ErrorCode.Timeout,
  ErrorCode.NotFound,
]);

/**
 * The handle's state machine. It is fed journal events of its dispatch (live from the run's
 * subjects, or from the recorded history on a replay), deduplicated by event id because core-NATS
 * subscribers also see publishes JetStream deduplicated or refused.
 *
 * Its result is only ever an outcome the journal recorded: the gateway's answer when it carries
 * one (a replay), else what {@link RecordedOutcomeReader} answers once a settlement is heard. What
 * is heard on the run's subjects is not verified (a client holds no service key): the losing
 * settlement of a race, which the stream refused, is heard too, and on a broker that lets other
 * clients publish there so is a forged one. So `approval:pending` — what a host asks a person to
 * decide — surfaces only once {@link RecordedApprovalReader} confirms the journal recorded that
 * very parked call (this dispatch, its key, the digest of the input shown), and `tool:end` only
 * for a heard settlement with the recorded outcome (its result or error, exactly), when the handle
 * finishes; `tool:start` is surfaced as heard, for display.
 */
export class DispatchHandleImpl<R> implements DispatchHandle<R> {
  readonly result: Promise<TypedDispatchOutcome<R>>;
  private readonly seenIds = new Set<string>();
  /** The approval keys surfaced as `approval:pending` (a parked call heard twice surfaces once). */
  private readonly surfacedKeys = new Set<string>();
  private readonly emitted: DispatchEvent[] = [];
  private readonly listeners = new Map<DispatchEventName, Set<Listener>>();
  private settle!: (outcome: TypedDispatchOutcome<R>) => void;
  private fail!: (err: ToolgateError) => void;
  private done = false;
  private recordedOutcome: DispatchOutcome | undefined;
  /** Settlements heard, not yet matched with the recorded outcome (each one's `tool:end` waits). */
  private readonly heardSettled: SettledEvent[] = [];
  /** Finished without having heard its settlement: the outcome whose `tool:end` is still awaited. */
  private endAwaited: { outcome: DispatchOutcome; timer: NodeJS.Timeout } | undefined;
  /** Whether the recorded outcome is being asked for (one ask at a time per handle). */
  private asking = false;

  constructor(
    readonly dispatchId: string,
    readonly runId: string,
    readonly status: 'accepted' | 'replayed',
    private readonly call: CallFacts,
    private readonly resolver: (
      key: string,
      options: ResolveExternalOptions & { dispatchId: string },
    ) => Promise<ResolveApprovalResult>,
    private readonly onDone: () => void,
    private readonly readRecorded: RecordedOutcomeReader,
    private readonly readApproval: RecordedApprovalReader,
  ) {
    this.result = new Promise<TypedDispatchOutcome<R>>((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
    });
    // A caller that only listens to events must not crash the process when the client closes.
    this.result.catch(() => undefined);
  }

  get callId(): string {
    return this.call.callId;
  }

  /** Feeds one journal event; events of other dispatches and repeats are ignored. */
  feed(event: JournalEvent): void {
    if (event.dispatchId !== this.dispatchId) return;
    // A copy heard again (a retry the stream deduplicated) is fed once. The events checked against
    // the record are told apart by content too: a forgery that reuses a genuine event's id (they
    // are predictable) and is heard first must not shadow the genuine one.
    let seen = event.id;
    if (event.type === 'suspended' || event.type === 'settled') {
      // An event that has no canonical form (nested deeper than any genuine one) is nobody's.
      const digest = digestOf(event);
      if (digest === undefined) return;
      seen = `${event.id}/${digest}`;
    }
    if (this.seenIds.has(seen)) return;
    this.seenIds.add(seen);
    if (this.endAwaited && event.type === 'settled') {
      if (!this.emitEndFor(this.endAwaited.outcome, [event])) return;
      clearTimeout(this.endAwaited.timer);
      this.endAwaited = undefined;
      this.onDone();
      return;
    }
    if (this.done) return;
    if (event.type === 'decided') {
      this.call.decision = {
        verdict: event.verdict,
        decidedBy: event.decidedBy,
        ...(event.rule !== undefined ? { rule: event.rule } : {}),
      };
    }
    if (event.type === 'suspended') {
      void this.surfaceIfRecorded(event);
      return;
    }
    if (event.type !== 'settled') {
      const mapped = toDispatchEvent(event, this.call);
      if (mapped) this.emit(mapped);
      return;
    }
    // Bounded, whatever is published on the run's subjects: the first are kept, so a flood after
    // the genuine settlement cannot push it out.
    if (this.heardSettled.length < MAX_HEARD_SETTLED) this.heardSettled.push(event);
    if (this.recordedOutcome) this.finish(this.recordedOutcome);
    else void this.askRecorded();
  }

  /**
   * A settlement was heard: asks for the recorded outcome until there is one, then finishes with
   * it. While the journal records none (what was heard was refused or forged, and the call is
   * still running) the gateway's wait paces the asks; the handle asks until it settles or closes.
   */
  private async askRecorded(): Promise<void> {
    if (this.asking) return;
    this.asking = true;
    let failures = 0;
    while (!this.done) {
      const began = Date.now();
      let pause = 0;
      try {
        const outcome = await this.readRecorded();
        if (outcome) return this.finish(outcome);
        failures = 0;
        pause = MIN_ASK_INTERVAL_MS - (Date.now() - began);
      } catch (err) {
        const code = err instanceof ToolgateError ? err.code : undefined;
        if (code === undefined || !RETRIED_CODES.has(code)) return this.failWith(err);
        pause = RETRY_PAUSES_MS[Math.min(failures++, RETRY_PAUSES_MS.length - 1)]!;
      }
      if (pause > 0 && !this.done) await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  /**
   * A parked call was heard: surfaces it as `approval:pending` once the gateway answers that the
   * journal recorded it — pending, for this dispatch and run, under the heard key, with the heard
   * input's digest — with the recorded tool, rule, deadline and timeout outcome. A heard one whose
   * input does not make its key, or that the journal does not hold, is never surfaced: a forgery
   * could show an approver a harmless input under the key of a harmful call. Asked again (with
   * growing pauses) while the gateway answers `not-found` (heard before the stream stored it) or
   * is unavailable, until the handle is done.
   */
  private async surfaceIfRecorded(heard: SuspendedEvent): Promise<void> {
    const digest = inputDigest(heard.input);
    if (approvalKey(heard.tool.name, heard.input) !== heard.approvalKey) return;
    for (let failures = 0; !this.done;) {
      let recorded: ApprovalDetail['approval'];
      try {
        recorded = (await this.readApproval(heard.approvalKey)).approval;
      } catch (err) {
        const code = err instanceof ToolgateError ? err.code : undefined;
        if (code === undefined || !RETRIED_CODES.has(code)) return;
        const pause = RETRY_PAUSES_MS[Math.min(failures++, RETRY_PAUSES_MS.length - 1)]!;
        await new Promise((resolve) => setTimeout(resolve, pause));
        continue;
      }
      const { toolName, expiresAt, onTimeout } = recorded;
      const same =
        recorded.status === 'pending' &&
        recorded.dispatchId === this.dispatchId &&
        recorded.runId === this.runId &&
        recorded.approvalKey === heard.approvalKey &&
        recorded.inputDigest === digest;
      if (!same || !toolName || !expiresAt || !onTimeout || this.done) return;
      if (this.surfacedKeys.has(recorded.approvalKey)) return;
      this.surfacedKeys.add(recorded.approvalKey);
      this.emit({
        type: 'approval:pending',
        key: recorded.approvalKey,
        dispatchId: this.dispatchId,
        toolName,
        input: heard.input,
        ...(recorded.rule !== undefined && recorded.rule !== null ? { rule: recorded.rule } : {}),
        expiresAt,
        onTimeout,
      });
      return;
    }
  }

  /** The outcome the journal recorded, as the gateway answered it: the result, whatever is heard. */
  recorded(outcome: DispatchOutcome): void {
    this.recordedOutcome = outcome;
  }

  /**
   * Settles from an outcome the journal recorded (the gateway's answer), surfacing `tool:end` for
   * the heard settlement that carries it. When none was heard yet, the handle keeps listening for
   * it a while ({@link END_GRACE_MS}) before it lets go of the run's subjects.
   */
  finish(outcome: DispatchOutcome): void {
    if (this.done) return;
    this.done = true;
    const ended = this.emitEndFor(outcome, this.heardSettled);
    this.heardSettled.length = 0;
    this.settle(outcome as TypedDispatchOutcome<R>);
    if (ended) return this.onDone();
    const timer = setTimeout(() => {
      this.endAwaited = undefined;
      this.onDone();
    }, END_GRACE_MS);
    timer.unref?.();
    this.endAwaited = { outcome, timer };
  }

  /** Surfaces `tool:end` for the first of `heard` that carries `outcome` exactly; whether one did. */
  private emitEndFor(outcome: DispatchOutcome, heard: readonly SettledEvent[]): boolean {
    const recorded = digestOf(outcome);
    const genuine = heard.find((s) => digestOf(outcomeOf(s)) === recorded);
    const mapped = genuine && toDispatchEvent(genuine, this.call);
    if (mapped) this.emit(mapped);
    return mapped !== undefined;
  }

  /** Rejects a still-open result (the client is closing); stops awaiting a `tool:end`. */
  abandon(reason: string): void {
    if (this.endAwaited) {
      clearTimeout(this.endAwaited.timer);
      this.endAwaited = undefined;
      this.onDone();
    }
    this.failWith(
      new ToolgateError(ErrorCode.Cancelled, reason, { details: { dispatchId: this.dispatchId } }),
    );
  }

  private failWith(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.fail(
      err instanceof ToolgateError
        ? err
        : new ToolgateError(ErrorCode.Internal, (err as Error)?.message ?? String(err)),
    );
    this.onDone();
  }

  on<E extends DispatchEventName>(event: E, listener: (payload: DispatchEvents[E]) => void): this {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    const l = listener as Listener;
    set.add(l);
    const past = this.emitted.filter((e) => e.type === event);
    if (past.length) {
      queueMicrotask(() => {
        for (const e of past) if (set.has(l)) safeCall(l, e);
      });
    }
    return this;
  }

  off<E extends DispatchEventName>(event: E, listener: (payload: DispatchEvents[E]) => void): this {
    this.listeners.get(event)?.delete(listener as Listener);
    return this;
  }

  resolveExternal(key: string, options: ResolveExternalOptions): Promise<ResolveApprovalResult> {
    return this.resolver(key, { ...options, dispatchId: this.dispatchId });
  }

  private emit(event: DispatchEvent): void {
    this.emitted.push(event);
    for (const l of this.listeners.get(event.type) ?? []) safeCall(l, event);
  }
}

/** The canonical digest of `value`, or undefined when it has none (too deep, not JSON). */
function digestOf(value: unknown): string | undefined {
  try {
    return canonicalDigest(value);
  } catch {
    return undefined;
  }
}

/** A throwing listener is the caller's bug; it must not stop the dispatch from settling. */
function safeCall(listener: Listener, event: DispatchEvent): void {
  try {
    listener(event);
  } catch {
    // deliberately swallowed: see above
  }
}
