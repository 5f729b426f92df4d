import { type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  ONCE_PER_DISPATCH,
  ToolgateError,
  type EventKeys,
  type UntrustedReason,
  type JournalEvent,
  type JournalEventOf,
  type JournalEventType,
  type Subjects,
} from '@toolgate/contracts';
import { Attr, injectTraceContext, producerSpan } from '@toolgate/telemetry';
import { AckedPublisher } from './acked-publisher';
import { DirectGets, type DirectMessage, type DirectQuery, type ReadFrom } from './direct-get';
import { isTransitionTaken } from './nats-errors';
import { trustedEvent } from './event-trust';
import { leanHeaders } from './lean-headers';

/** The result of appending one event. */
export type AppendResult =
  | { appended: true; seq: number; duplicate: boolean }
  /**
   * Not recorded: a once-per-dispatch transition of this type is already recorded (the broker
   * refused ours), or an append's `lastSubjectSequence` did not hold — the race is lost. (Kept out
   * by forgeries instead, nothing genuine recorded, `append` throws: see {@link heldByForgeries}.)
   */
  | { appended: false; seq?: undefined; duplicate?: undefined };

/**
 * What `append` throws when messages nobody signed kept taking a once-per-dispatch transition for
 * {@link SUPERSEDE_ATTEMPTS} attempts: nothing genuine is recorded ({@link JournalPublisher.last}
 * reads null) and trying again later may win. `unavailable` and retryable, so every writer treats
 * it as it treats a broker outage — a delivery is redelivered (at its last dead-lettered), a
 * settlement retried, a caller answered 503 — and none takes it for a transition recorded.
 */
function heldByForgeries(event: Pick<JournalEvent, 'type' | 'dispatchId'>): ToolgateError {
  return new ToolgateError(
    ErrorCode.Unavailable,
    `the dispatch's ${event.type} could not be recorded: unsigned messages kept taking its place (retryable)`,
    { details: { dispatchId: event.dispatchId, retryable: true } },
  );
}

/** An event read back from the journal, with its stream sequence. */
export interface StoredEvent<E extends JournalEvent = JournalEvent> {
  event: E;
  seq: number;
  /** When the broker stored it (its clock, not the publisher's `at`, which the publisher chose). */
  storedAt: Date;
  /** Its message headers: the trace context it was published in (a parked call resumes it). */
  headers: MsgHdrs | undefined;
}

/** Where a subject's last message sits, whatever it is (see {@link JournalPublisher.lastWithHead}). */
export interface SubjectHead {
  seq: number;
  /** When the broker stored it. */
  storedAt: Date;
  /** Whether a producer of the subject's event type signed it. */
  signed: boolean;
}

/** How one append is published. */
export interface AppendOptions {
  headers?: MsgHdrs;
  /**
   * Refuse the append (`{ appended: false }`) unless the event's subject last holds this stream
   * sequence: a compare-and-set on a subject (0 = nothing recorded yet). Once-per-dispatch types
   * always expect 0; this is for the others, such as the executor's claim on `started`.
   */
  lastSubjectSequence?: number;
}

/** What else a {@link JournalPublisher} is told. */
export interface JournalPublisherOptions {
  /** Called for each event a read refused as untrusted (metrics). Must not throw. */
  onUntrusted?(reason: UntrustedReason): void;
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0;

/**
 * How many publishes an append of a once-per-dispatch type makes, at most, when its transition is
 * held by an untrusted message (a forged event an open broker let in): the first, then one
 * compare-and-set on the last forgery's sequence per forgery that got in again before it. A client
 * that re-forges faster than that wins the subject for this append, which then returns
 * `{ appended: false }` rather than loop for as long as it keeps up.
 */
export const SUPERSEDE_ATTEMPTS = 3;

/**
 * Appends events to the journal stream and reads single events back by subject. The only writer
 * API services use, so every publish gets its `Nats-Msg-Id` (dedupe of retried publishes), the
 * once-per-dispatch expectation, the caller's trace context and the service's signatures in its
 * headers (`ServiceKeys.signEvent`: one per reader of the type); every read verifies them, so
 * what another client wrote on the subject is never read as an event.
 */
export class JournalPublisher {
  private readonly acked: AckedPublisher;
  private readonly direct: DirectGets;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    /** This service's signing keys: it signs what it appends and verifies what it reads. */
    readonly keys: EventKeys,
    private readonly options: JournalPublisherOptions = {},
  ) {
    this.acked = new AckedPublisher(nc);
    this.direct = new DirectGets(nc);
  }

  /**
   * Publishes `event`. A once-per-dispatch type whose transition is already recorded, or an append
   * whose `lastSubjectSequence` does not hold, returns `{ appended: false }` instead of throwing:
   * that is how racing writers learn they lost. One that forgeries kept out throws a retryable
   * `unavailable` ({@link heldByForgeries}), as a broker outage does.
   */
  async append(event: JournalEvent, options: AppendOptions = {}): Promise<AppendResult> {
    const subject = this.subjects.journal.event(
      event.tenant,
      event.runId,
      event.dispatchId,
      event.type,
    );
    return producerSpan(
      subject,
      {
        [Attr.MessageId]: event.id,
        [Attr.DispatchId]: event.dispatchId,
        [Attr.Tenant]: event.tenant,
        // How the call ended, on the span that records it, whoever settles (evaluator, executor,
        // timeout sweep): a trace shows a deny or an error code without opening the journal.
        ...(event.type === 'settled'
          ? {
              [Attr.Tool]: event.toolName,
              [Attr.Outcome]: event.outcome,
              ...(event.error ? { [Attr.ErrorCode]: event.error.code } : {}),
            }
          : {}),
      },
      async () => {
        const headers = injectTraceContext(options.headers ?? leanHeaders());
        const payload = Buffer.from(JSON.stringify(event));
        this.keys.signEvent(subject, event.type, payload, headers);
        const oncePerDispatch = ONCE_PER_DISPATCH.has(event.type);
        let lastSubjectSequence = oncePerDispatch ? 0 : options.lastSubjectSequence;
        let msgID = event.id;
        for (let attempt = 1; ; attempt++) {
          // The sequence of the forgery to append after next, or null when there is none to.
          let forged: number | null;
          try {
            const ack = await this.acked.publish(subject, payload, {
              msgID,
              headers,
              ...(lastSubjectSequence !== undefined ? { lastSubjectSequence } : {}),
            });
            if (!ack.duplicate || !oncePerDispatch)
              return {
                appended: true,
                seq: ack.seq,
                duplicate: ack.duplicate && !ack.retriedUnknown,
              };
            const stored = await this.genuineAt(subject, ack.seq);
            if (stored)
              // After an attempt whose ack was lost in a leader change, the duplicate is this
              // append's own record only if it holds these very bytes: another submitter's copy of
              // the event (the same id, another `at`) makes this a replay, not an acceptance.
              return {
                appended: true,
                seq: ack.seq,
                duplicate: !(ack.retriedUnknown && sameBytes(stored.data, payload)),
              };
            // The broker took it for a retry of a message nobody signed that carries this event's
            // id as its `Nats-Msg-Id` (a once-per-dispatch id is predictable): nothing genuine is
            // recorded. Appended after it under an id of its own, which a retry of this append
            // (the same forgery answering for the event's id) is deduplicated on.
            msgID = `${event.id}:superseding:${ack.seq}`;
            forged = ack.seq;
          } catch (err) {
            if (!isTransitionTaken(err)) throw err;
            if (attempt >= SUPERSEDE_ATTEMPTS) throw heldByForgeries(event);
            if (!oncePerDispatch && !lastSubjectSequence) return { appended: false };
            // What holds the subject, from the leader (which refused the append against it). A
            // clustered nats-server 2.9 checks an expectation above 0 before it deduplicates: an
            // attempt of this very append that was stored but whose ack was lost (a leader change,
            // a slow commit) makes its resend "wrong last sequence" — ours if its bytes sit there.
            const held = await this.heldBy(subject, payload);
            if (held.by === 'this') return { appended: true, seq: held.seq, duplicate: false };
            if (!oncePerDispatch) return { appended: false };
            // Taken by a genuine event: the race is lost. Taken by a message nobody signed (another
            // client on an open broker): append after it, with a compare-and-set on its sequence,
            // so a forged event cannot hold a dispatch's transition (every reader skips it).
            forged = held.by === 'forgeries' ? held.seq : null;
          }
          if (forged === null) return { appended: false };
          if (attempt >= SUPERSEDE_ATTEMPTS) throw heldByForgeries(event);
          lastSubjectSequence = forged;
        }
      },
    );
  }

  /** The last event of `type` recorded for a dispatch (or worktree), or null. */
  async last<T extends JournalEventType>(
    tenant: string,
    runId: string,
    key: string,
    type: T,
    /**
     * `from: 'leader'` skips the replica's read of a once-per-dispatch type: for a read whose
     * usual answer is "nothing recorded" (settled-or-not before a call runs), which the leader
     * would be asked to confirm anyway — one round trip instead of two.
     */
    options: { from?: ReadFrom } = {},
  ): Promise<StoredEvent<JournalEventOf<T>> | null> {
    // Anything else last on the subject (not signed by its producer, not JSON, not an event) reads
    // as nothing recorded, but a once-per-dispatch transition recorded before it (a forgery
    // published after the genuine event, which the broker does not refuse) is still the one.
    const scan = ONCE_PER_DISPATCH.has(type) ? 'first' : null;
    return (await this.readLast(tenant, runId, key, type, scan, options.from)).stored;
  }

  /**
   * The last trusted event of `type` on a subject that keeps a history (a run's `error-streak`),
   * and the sequence of the subject's last message whatever it is (`headSeq`: the compare-and-set
   * of the next state appends after it, so a forged message there cannot block the history). With
   * an untrusted message last, the subject is read forward to the last trusted event before it.
   */
  async lastState<T extends JournalEventType>(
    tenant: string,
    runId: string,
    key: string,
    type: T,
  ): Promise<{ stored: StoredEvent<JournalEventOf<T>> | null; headSeq: number }> {
    const { stored, head } = await this.readLast(tenant, runId, key, type, 'last');
    return { stored, headSeq: head?.seq ?? 0 };
  }

  /**
   * The last event of `type`, as {@link last} reads it, and where the subject's last message sits,
   * read or not (`head`, null: nothing there) — in one read. For a compare-and-set on a subject
   * whose last message `last` cannot read (not an event, or one this version refuses), so an
   * unreadable message can still be superseded. `head.signed`: whether a producer of the type
   * signed it (an event a newer release wrote, say) — or not (a forgery, to be ignored). The head
   * is the leader's for every type but a once-per-dispatch one found on a replica (such a subject
   * is never compared-and-set on anything but 0).
   */
  lastWithHead<T extends JournalEventType>(
    tenant: string,
    runId: string,
    key: string,
    type: T,
  ): Promise<{ stored: StoredEvent<JournalEventOf<T>> | null; head: SubjectHead | null }> {
    return this.readLast(tenant, runId, key, type, ONCE_PER_DISPATCH.has(type) ? 'first' : null);
  }

  /**
   * The subject's last message, as a trusted event of `type` — or, when it is untrusted, the
   * first or last trusted event before it (`scan`; null: none) — and where it sits.
   *
   * Every caller decides on what it reads (a cross-check, a claim, settled-or-not, replay, the
   * error streak, a resolution), so the read sees every event the leader acknowledged: a
   * once-per-dispatch transition found on any replica (the cheap direct get) is final — it is
   * recorded once and never replaced — and anything else (not found, untrusted, or a subject that
   * keeps a history, whose last message a lagging follower reads as an older one) is read again
   * from the stream's leader.
   */
  private async readLast<T extends JournalEventType>(
    tenant: string,
    runId: string,
    key: string,
    type: T,
    scan: 'first' | 'last' | null,
    from: ReadFrom = 'replica',
  ): Promise<{ stored: StoredEvent<JournalEventOf<T>> | null; head: SubjectHead | null }> {
    const subject = this.subjects.journal.event(tenant, runId, key, type);
    let read =
      ONCE_PER_DISPATCH.has(type) && from === 'replica'
        ? await this.readLastFrom('replica', subject, type, scan)
        : null;
    if (!read?.stored) read = await this.readLastFrom('leader', subject, type, scan);
    if (read.untrusted) this.options.onUntrusted?.(read.untrusted);
    return { stored: read.stored, head: read.head };
  }

  private async readLastFrom<T extends JournalEventType>(
    from: ReadFrom,
    subject: string,
    type: T,
    scan: 'first' | 'last' | null,
  ): Promise<{
    stored: StoredEvent<JournalEventOf<T>> | null;
    head: SubjectHead | null;
    /** Why the subject's last message is not a trusted event (other than not being one). */
    untrusted?: UntrustedReason;
  }> {
    const msg = await this.get(from, subject, { last_by_subj: subject });
    if (!msg) return { stored: null, head: null };
    const trusted = trustedEvent(this.keys, msg.subject, msg.data, msg.header);
    const head = {
      seq: msg.seq,
      storedAt: msg.time,
      signed: trusted.ok || trusted.reason === 'not-an-event',
    };
    let read = trusted.ok ? { msg, event: trusted.event } : null;
    const untrusted = !trusted.ok && trusted.reason !== 'not-an-event' ? trusted.reason : undefined;
    if (!trusted.ok) read = scan ? await this.trustedBefore(from, msg, scan) : null;
    else if (scan === 'first' && !(await this.storedFirst(from, msg)))
      // A genuine event published again after the recorded one (a race's refused loser, replayed
      // without the expectation on an open broker): the recorded one is the first before it.
      read = (await this.trustedBefore(from, msg, 'first')) ?? read;
    if (!read || read.event.type !== type)
      return { stored: null, head, ...(untrusted ? { untrusted } : {}) };
    return {
      stored: {
        event: read.event as JournalEventOf<T>,
        seq: read.msg.seq,
        storedAt: read.msg.time,
        headers: read.msg.header,
      },
      head,
      ...(untrusted ? { untrusted } : {}),
    };
  }

  /**
   * Whether a trusted once-per-dispatch event is its subject's recorded transition as it stands:
   * the broker stored it under this publisher's expectation (`Nats-Expected-Last-Subject-Sequence`,
   * which it keeps in the stored headers) of an empty subject, or of one whose last message was not
   * a trusted event (a forgery superseded). One stored without an expectation, or after a trusted
   * event, was published again by someone else: never a read's answer when the recorded one is
   * there. No read unless the header says so (only after forgeries).
   */
  private async storedFirst(from: ReadFrom, msg: DirectMessage): Promise<boolean> {
    const expected = msg.header?.get('Nats-Expected-Last-Subject-Sequence');
    if (!expected) return false;
    const after = Number(expected);
    if (after === 0) return true;
    const prior = await this.get(from, msg.subject, { seq: after });
    return !(prior && trustedEvent(this.keys, prior.subject, prior.data, prior.header).ok);
  }

  /**
   * What holds `subject` now: this very append (`payload` sits last, trusted); another genuine
   * event (the last message, or on a once-per-dispatch subject the genuine event forgeries were
   * published after); or only forgeries (or nothing), with the sequence to compare-and-set on.
   * From the leader: a follower behind it would call a subject whose genuine event it has not
   * applied held by nothing.
   */
  private async heldBy(
    subject: string,
    payload: Uint8Array,
  ): Promise<{ by: 'this' | 'forgeries'; seq: number } | { by: 'another' }> {
    const msg = await this.get('leader', subject, { last_by_subj: subject });
    if (!msg) return { by: 'forgeries', seq: 0 };
    if (trustedEvent(this.keys, msg.subject, msg.data, msg.header).ok)
      return sameBytes(msg.data, payload) ? { by: 'this', seq: msg.seq } : { by: 'another' };
    return (await this.trustedBefore('leader', msg, 'first'))
      ? { by: 'another' }
      : { by: 'forgeries', seq: msg.seq };
  }

  /**
   * Whether the message at `seq` is a trusted event on `subject`. A replica that has it answers
   * for good (a stored message never changes); one that has not applied it yet (the broker
   * answered a duplicate from the leader) is not taken for a "no": the leader is asked — else a
   * resubmitted call would be taken for a forgery and recorded twice. The trusted message, or null.
   */
  private async genuineAt(subject: string, seq: number): Promise<DirectMessage | null> {
    const genuine = (msg: DirectMessage | null) =>
      msg?.subject === subject && trustedEvent(this.keys, msg.subject, msg.data, msg.header).ok
        ? msg
        : null;
    return (
      genuine(await this.get('replica', subject, { seq })) ??
      genuine(await this.get('leader', subject, { seq }))
    );
  }

  /**
   * The first (or last) trusted event on `last`'s subject before it, read in stream order: on a
   * once-per-dispatch subject the genuine event a forgery was published after (there is one at
   * most); on a subject that keeps a history, its last genuine state. Read only when an untrusted
   * message sits last, so never on the path of a journal nobody forges on.
   */
  private async trustedBefore(
    from: ReadFrom,
    last: DirectMessage,
    which: 'first' | 'last',
  ): Promise<{ msg: DirectMessage; event: JournalEvent } | null> {
    let found: { msg: DirectMessage; event: JournalEvent } | null = null;
    for (let seq = 1; seq < last.seq;) {
      const msg = await this.get(from, last.subject, { seq, next_by_subj: last.subject });
      if (!msg || msg.seq >= last.seq) return found;
      const trusted = trustedEvent(this.keys, msg.subject, msg.data, msg.header);
      if (trusted.ok) {
        found = { msg, event: trusted.event };
        if (which === 'first') return found;
      }
      seq = msg.seq + 1;
    }
    return found;
  }

  /** One stored message of the journal, from any replica or from the stream's leader. */
  private get(from: ReadFrom, subject: string, query: DirectQuery): Promise<DirectMessage | null> {
    // A partitioned journal keeps a subject in its tenant's partition's stream (and leader).
    return this.direct.read(this.subjects.journal.streamOf(subject), query, from);
  }

  /** Fails appends still waiting for their ack (their outcome is unknown; a retry is deduplicated) and reads waiting for theirs. */
  close(): void {
    this.acked.close();
    this.direct.close();
  }
}
