import {
  ErrorCode,
  outcomeOf,
  ToolgateError,
  type DispatchOutcome,
  type JournalEvent,
  type ResolvedEvent,
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
 * The handle's state machine. It is fed journal events of its dispatch (live from the run's
 * subjects, or from the recorded history on a replay), deduplicated by event id because core-NATS
 * subscribers also see publishes JetStream deduplicated or refused.
 */
export class DispatchHandleImpl<R> implements DispatchHandle<R> {
  readonly result: Promise<TypedDispatchOutcome<R>>;
  private readonly seenIds = new Set<string>();
  private readonly emitted: DispatchEvent[] = [];
  private readonly listeners = new Map<DispatchEventName, Set<Listener>>();
  private settle!: (outcome: TypedDispatchOutcome<R>) => void;
  private fail!: (err: ToolgateError) => void;
  private done = false;
  private recordedOutcome: DispatchOutcome | undefined;

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
    if (event.dispatchId !== this.dispatchId || this.seenIds.has(event.id)) return;
    this.seenIds.add(event.id);
    if (this.done) return;
    if (event.type === 'decided') {
      this.call.decision = {
        verdict: event.verdict,
        decidedBy: event.decidedBy,
        ...(event.rule !== undefined ? { rule: event.rule } : {}),
      };
    }
    const mapped = toDispatchEvent(event, this.call);
    if (mapped) this.emit(mapped);
    if (event.type === 'settled') this.finish(this.recordedOutcome ?? outcomeOf(event));
  }

  /** The outcome the journal recorded, as the gateway answered it: the result, whatever is heard. */
  recorded(outcome: DispatchOutcome): void {
    this.recordedOutcome = outcome;
  }

  /** Settles from an outcome the gateway already recorded (a replay, or a fast settlement). */
  finish(outcome: DispatchOutcome): void {
    if (this.done) return;
    this.done = true;
    this.settle(outcome as TypedDispatchOutcome<R>);
    this.onDone();
  }

  /** Rejects a still-open result (the client is closing). */
  abandon(reason: string): void {
    if (this.done) return;
    this.done = true;
    this.fail(
      new ToolgateError(ErrorCode.Cancelled, reason, { details: { dispatchId: this.dispatchId } }),
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

/** A throwing listener is the caller's bug; it must not stop the dispatch from settling. */
function safeCall(listener: Listener, event: DispatchEvent): void {
  try {
    listener(event);
  } catch {
    // deliberately swallowed: see above
  }
}
