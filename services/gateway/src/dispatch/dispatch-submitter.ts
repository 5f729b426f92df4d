import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { headersOf, type JournalPublisher } from '@toolgate/bus';
import {
  AwaitDispatchRequestSchema,
  dispatchKey,
  ErrorCode,
  journalEvent,
  outcomeOf,
  SubmitDispatchRequestSchema,
  ToolgateError,
  type DispatchOutcome,
  type AwaitDispatchResponse,
  type DispatchState,
  type JournalEvent,
  type Subjects,
  type SubmitDispatchResponse,
  type UntrustedReason,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import { Attr, annotate } from '@toolgate/telemetry';
import type { Principal } from '../auth/token-auth';
import { parseRequest } from '../api/parse-request';
import { resolveToolRef } from './tool-ref';

/** Model-retry attempts allowed per call chain. */
const MAX_MODEL_RETRIES = 2;

/** Pauses between reads of an outcome heard but not yet readable (see `confirmRecorded`): ~1.3 s. */
const CONFIRM_PAUSES_MS = [5, 10, 20, 40, 80, 160, 320, 640];

/**
 * Accepts a tool call: validates it, keys it by content, journals `requested` (once — the broker
 * refuses a second one for the same key) and, when asked to, waits for the outcome. A replayed call
 * gets the recorded outcome; the tool does not run again.
 */
export class DispatchSubmitter {
  /** Callers waiting for an outcome, by {@link routeKey}; several may wait on one dispatch. */
  private readonly waiters = new Map<string, WaitedDispatch>();
  /**
   * One subscription per outcome type for the submitter's lifetime, shared by every waiter: a
   * subscription per waited dispatch would put a SUB and an UNSUB write to the broker on each
   * call's latency path.
   */
  private readonly outcomes: readonly Subscription[];
  /** Length of `<prefix>.journal.`, where a journal subject's tenant token starts. */
  private readonly routeStart: number;
  private stopped = false;
  /** One per journal partition (the tenant's stream is the one whose retention matters). */
  private readonly retention: readonly RetentionWatch[];

  constructor(
    nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly publisher: JournalPublisher,
    private readonly registry: ToolRegistry,
    private readonly options: {
      waitDefaultMs: number;
      now: () => Date;
      /** Told whether each journaled submission was new or a replay (metrics). Must not throw. */
      onSubmitted?(status: 'accepted' | 'replayed', tenant: string, tool: string): void;
      /** Told about each outcome refused as untrusted while a caller waited (metrics). Must not throw. */
      onUntrusted?(reason: UntrustedReason): void;
      /**
       * What the projection holds of a dispatch (null: nothing), asked before a submission is
       * journaled once the stream's retention has dropped anything: a call whose `requested` aged
       * out of the stream is still answered as the replay it is (see {@link RecordedDispatch}).
       */
      recorded?(tenant: string, dispatchId: string): Promise<RecordedDispatch | null>;
    },
  ) {
    this.retention = subjects.journal.partitions.map((p) => new RetentionWatch(nc, p.stream));
    this.routeStart = `${subjects.prefix}.journal.`.length;
    // JetStream publishes reach core subscribers too. A callback, not an iterator: every settlement
    // of every tenant passes through here, and most have no waiter.
    this.outcomes = (['settled', 'suspended'] as const).map((type) =>
      nc.subscribe(subjects.journal.ofType(type), {
        callback: (err, msg) => {
          if (!err) this.route(msg);
        },
      }),
    );
    void this.recheckOnReconnect(nc);
  }

  /**
   * A core subscription hears nothing while its connection is down: an outcome published then
   * (the gateway's broker node died, and the connection moved to another) never reaches it. Once
   * reconnected, every waited dispatch's outcome is read from the journal instead.
   */
  private async recheckOnReconnect(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (this.stopped) return;
      if (status.type === 'reconnect')
        for (const waited of [...this.waiters.values()]) void this.readOutcome(waited);
    }
  }

  /** Reads a waited dispatch's outcome from the journal and hands it to its waiters, if any. */
  private async readOutcome(waited: WaitedDispatch): Promise<void> {
    const { tenant, runId, dispatchId } = waited;
    try {
      const [settled, suspended] = await Promise.all([
        this.publisher.last(tenant, runId, dispatchId, 'settled'),
        this.publisher.last(tenant, runId, dispatchId, 'suspended'),
      ]);
      const found = settled ?? suspended;
      if (found) this.deliver(waited, found.event);
    } catch {
      // Not readable now (an election): the waiter keeps waiting, and reads once more at its end.
    }
  }

  /**
   * Unsubscribes from outcomes and releases every caller still waiting, who answers with the state
   * it has (`requested`, as on a timeout): the dispatch is journaled and can be read or replayed
   * on another replica, so a shutdown need not sit out anyone's long poll. Later submissions do
   * not wait. Idempotent.
   */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const sub of this.outcomes) sub.unsubscribe();
    for (const waited of this.waiters.values())
      for (const waiter of waited.waiting) waiter.wake?.();
  }

  /**
   * `traceId` is the trace the request came in (see `CallOptions.traceId`), recorded on
   * `requested` for a trace UI link.
   */
  async submit(
    principal: Principal,
    body: unknown,
    traceId?: string,
  ): Promise<SubmitDispatchResponse> {
    const req = parseRequest(SubmitDispatchRequestSchema, body);
    const tool = await resolveToolRef(this.registry, principal.tenant, req.tool);
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
      tool,
      input: req.input,
      agent: req.agent,
      isolation: req.isolation,
      ...(req.profile ? { profile: req.profile } : {}),
      ...(req.taint ? { taint: req.taint } : {}),
      submittedBy: principal.identity,
      ...(req.retryOf ? { retryOf: req.retryOf } : {}),
      retryDepth,
      ...(traceId ? { traceId } : {}),
    });
    const waitMs =
      req.wait === true ? this.options.waitDefaultMs : req.wait === false ? 0 : (req.wait ?? 0);
    // Register the waiter before publishing so an outcome that comes quickly is not missed.
    const watcher = waitMs > 0 ? this.watch(principal.tenant, req.runId, dispatchId) : undefined;
    try {
      // The stream dedups a resubmission only while it holds the first `requested`: past its
      // retention the projection, which keeps every dispatch, answers for it — the tool never runs
      // twice for one call however late it is sent again.
      const old = await this.recordedBeyondRetention(principal.tenant, dispatchId);
      if (old) {
        this.options.onSubmitted?.('replayed', principal.tenant, tool.name);
        return old.state === 'settled' && old.settled
          ? { dispatchId, status: 'replayed', state: 'settled', settled: old.settled }
          : { dispatchId, status: 'replayed', state: old.state };
      }
      // Kept out by forgeries (nothing recorded), the append throws `unavailable`: the caller's
      // retry of the same call may win, where `replayed` would name a call that never was.
      const appended = await this.publisher.append(event);
      const status = appended.appended && !appended.duplicate ? 'accepted' : 'replayed';
      this.options.onSubmitted?.(status, principal.tenant, tool.name);
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

  /**
   * The outcome the journal recorded for a dispatch of the caller's tenant (`dispatch.await`): read
   * from the stream and verified, and when there is none yet, waited for up to `wait` ms the way a
   * submission's `wait` is (only what the stream recorded is answered: see
   * {@link confirmRecorded}). A dispatch the journal does not know is `not-found`; one whose
   * `requested` the stream's retention dropped is answered from the projection.
   */
  async awaitOutcome(principal: Principal, body: unknown): Promise<AwaitDispatchResponse> {
    const { runId, dispatchId, wait = 0 } = parseRequest(AwaitDispatchRequestSchema, body);
    const { tenant } = principal;
    annotate({ [Attr.DispatchId]: dispatchId, [Attr.Tenant]: tenant });
    // Registered before the read, so a settlement recorded in between is not missed.
    const watcher = wait > 0 ? this.watch(tenant, runId, dispatchId) : undefined;
    try {
      // A caller asks once it has heard the settlement: usually recorded, one read.
      const settled = await this.publisher.last(tenant, runId, dispatchId, 'settled');
      if (settled) return { dispatchId, state: 'settled', settled: outcomeOf(settled.event) };
      if (!(await this.publisher.last(tenant, runId, dispatchId, 'requested'))) {
        const old = await this.recordedBeyondRetention(tenant, dispatchId);
        if (old?.settled) return { dispatchId, state: 'settled', settled: old.settled };
        if (!old)
          throw new ToolgateError(
            ErrorCode.NotFound,
            `run ${runId} has no dispatch ${dispatchId}`,
            {
              details: { runId, dispatchId },
            },
          );
      }
      // The settlement the caller heard was published before this watch began, so the watch will
      // not hear it: read again as a heard one is while the stream stores it (an R3 leader stores
      // once a quorum has it), rather than only at the wait's end.
      watcher?.recheck();
      const seen = await watcher?.next(wait);
      return seen?.type === 'settled'
        ? { dispatchId, state: 'settled', settled: outcomeOf(seen) }
        : { dispatchId, state: 'pending' };
    } finally {
      watcher?.close();
    }
  }

  /**
   * The projection's record of a dispatch, when the stream may have dropped its `requested` (its
   * retention has dropped anything at all); null otherwise, or when the projection has none. A
   * projection that cannot be asked fails the submission (`unavailable`, retryable): accepting it
   * could run a call a second time.
   */
  private async recordedBeyondRetention(
    tenant: string,
    dispatchId: string,
  ): Promise<RecordedDispatch | null> {
    if (!this.options.recorded) return null;
    const retention = this.retention[this.subjects.journal.partitionOf(tenant).index]!;
    if (!(await retention.hasDropped())) return null;
    return this.options.recorded(tenant, dispatchId);
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

  /**
   * Registers a waiter for a dispatch's outcome. The key is derived from the subject the outcome
   * will be published on, so it is built (and its tokens validated) by the same code as the
   * publisher's, and it includes the tenant.
   */
  private watch(tenant: string, runId: string, dispatchId: string) {
    const key = this.routeKey(this.subjects.journal.event(tenant, runId, dispatchId, 'settled'));
    const waiter: Waiter = { seen: undefined, wake: undefined };
    let waited = this.waiters.get(key);
    if (!waited)
      this.waiters.set(key, (waited = { tenant, runId, dispatchId, waiting: new Set() }));
    waited.waiting.add(waiter);
    const entry = waited;
    return {
      /**
       * The outcome seen so far (`settled` over `suspended`), waiting up to `timeoutMs` for one. A
       * wait that ends with none reads the journal once: an outcome the subscription missed (see
       * {@link recheckOnReconnect}) is still the caller's answer.
       */
      next: async (timeoutMs: number): Promise<JournalEvent | undefined> => {
        if (!waiter.seen && !this.stopped) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, timeoutMs);
            waiter.wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          waiter.wake = undefined;
          // Woken by nothing (the wait ran out), or by a stop: reread, unless stopping.
          if (!(waiter.seen as JournalEvent | undefined) && !this.stopped)
            await this.readOutcome(entry);
        }
        return waiter.seen;
      },
      /** Reads the dispatch's settlement again as a heard one is ({@link confirmRecorded}). */
      recheck: () => void this.confirmRecorded(entry, 'settled'),
      close: () => {
        entry.waiting.delete(waiter);
        if (!entry.waiting.size && this.waiters.get(key) === entry) this.waiters.delete(key);
      },
    };
  }

  /**
   * Wakes an outcome's waiters, if any. The common case is that nobody waits (the gateway sees
   * every tenant's outcomes), so that path is a slice of the subject and a map lookup. For a
   * waiter only the signature is checked — a message not signed for the gateway by its producer
   * (another client publishing on the subject) wakes nobody and costs no read — and what is
   * answered is what {@link confirmRecorded} reads and parses from the stream.
   */
  private route(msg: Msg): void {
    const waiting = this.waiters.get(this.routeKey(msg.subject));
    if (!waiting) return;
    const untrusted = this.publisher.keys.verifyEvent(msg.subject, msg.data, headersOf(msg));
    if (untrusted) {
      this.options.onUntrusted?.(untrusted);
      return;
    }
    // Subscribed to these two types only (the subject's last token).
    const type = msg.subject.slice(msg.subject.lastIndexOf('.') + 1) as 'settled' | 'suspended';
    void this.confirmRecorded(waiting, type);
  }

  /**
   * Hands the dispatch's waiters the outcome of `type` the journal recorded, once it has. A core
   * subscription hears a publish as the broker receives it: before the stream has stored it (an R3
   * leader stores it once a quorum has it), and even when the stream refuses it — a second genuine
   * settlement (a cancel racing the tool's own, a holder taken over) loses the once-per-dispatch
   * expectation and still reaches every subscriber. What a caller is told must be what was
   * recorded, so what is heard only says when to read; not found yet, it is read again after
   * growing pauses, and after them the wait's own end reads once more.
   */
  private async confirmRecorded(waited: WaitedDispatch, type: 'settled' | 'suspended') {
    for (let attempt = 0; ; attempt++) {
      if (this.stopped || !waited.waiting.size) return;
      try {
        const stored = await this.publisher.last(
          waited.tenant,
          waited.runId,
          waited.dispatchId,
          type,
        );
        if (stored) return this.deliver(waited, stored.event);
      } catch {
        return; // Not readable now (an election): the wait's end reads once more.
      }
      if (attempt >= CONFIRM_PAUSES_MS.length) return;
      await new Promise((resolve) => setTimeout(resolve, CONFIRM_PAUSES_MS[attempt]));
    }
  }

  /** Hands a trusted outcome to a dispatch's waiters (`settled` over `suspended`). */
  private deliver(waited: WaitedDispatch, event: JournalEvent): void {
    if (event.type !== 'settled' && event.type !== 'suspended') return;
    for (const waiter of waited.waiting) {
      if (!waiter.seen || (event.type === 'settled' && waiter.seen.type !== 'settled')) {
        waiter.seen = event;
      }
      waiter.wake?.();
    }
  }

  /**
   * `<tenant>.<runId>.<key>` of a journal subject `<prefix>.journal.<tenant>.<runId>.<key>.<event>`:
   * tokens hold no dots, so this names one dispatch of one tenant's run.
   */
  private routeKey(subject: string): string {
    return subject.slice(this.routeStart, subject.lastIndexOf('.'));
  }
}

/** A dispatch some callers wait on, and those callers. */
interface WaitedDispatch {
  tenant: string;
  runId: string;
  dispatchId: string;
  waiting: Set<Waiter>;
}

/** One caller waiting in {@link DispatchSubmitter.submit}. */
interface Waiter {
  /** The first outcome seen, replaced by a `settled` that follows a `suspended`. */
  seen: JournalEvent | undefined;
  /** Ends the caller's wait early; set while it waits. */
  wake: (() => void) | undefined;
}

/** What the projection holds of a dispatch, as a replay answers it. */
export interface RecordedDispatch {
  state: DispatchState;
  settled?: DispatchOutcome;
}

/** A dispatch as the journal's `dispatch.get` answers it (the fields a replay needs). */
export interface ProjectedDispatch {
  status: string;
  outcome: DispatchOutcome['outcome'] | null;
  result?: unknown;
  error?: DispatchOutcome['error'] | null;
}

/** The projection's furthest stage of a dispatch, as a submission's state names it. */
const STATE_OF_STATUS: Record<string, DispatchState> = {
  requested: 'requested',
  decided: 'decided',
  suspended: 'suspended',
  resolved: 'decided',
  started: 'running',
  settled: 'settled',
};

/** What a replay answers from a projected dispatch. */
export function recordedDispatch(view: ProjectedDispatch): RecordedDispatch {
  const state = STATE_OF_STATUS[view.status] ?? 'requested';
  if (state !== 'settled' || !view.outcome) return { state };
  return {
    state,
    settled: {
      outcome: view.outcome,
      ...(view.result !== undefined && view.result !== null ? { result: view.result } : {}),
      ...(view.error ? { error: view.error } : {}),
    },
  };
}

/** How long "the stream has dropped nothing yet" is believed before it is asked again. */
const RETENTION_RECHECK_MS = 1000;

/**
 * Whether the journal stream has ever dropped a message (its first sequence is past 1: retention
 * by age or size, or a purge). Once it has, it has for good; until then the broker is asked at
 * most once a second, so a young deployment pays no projection lookup per submission.
 */
class RetentionWatch {
  private dropped = false;
  private checkedAtMs = -Infinity;
  private checking: Promise<boolean> | undefined;
  /** Made once: each `jetstreamManager` would first ask the broker for its API info. */
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly stream: string,
  ) {}

  async hasDropped(): Promise<boolean> {
    if (this.dropped || Date.now() - this.checkedAtMs < RETENTION_RECHECK_MS) return this.dropped;
    this.checking ??= (async () => {
      try {
        this.jsm ??= jetstreamManager(this.nc, { checkAPI: false });
        const info = await (await this.jsm).streams.info(this.stream);
        this.dropped = info.state.first_seq > 1;
        this.checkedAtMs = Date.now();
        return this.dropped;
      } catch {
        // A broker between leaders or away: the append decides (it retries, or fails the
        // submission); this answer stays what it was until the broker answers again.
        return this.dropped;
      } finally {
        this.checking = undefined;
      }
    })();
    return this.checking;
  }
}
