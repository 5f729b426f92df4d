import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import {
  ONCE_PER_DISPATCH,
  decodeJournalEvent,
  type JournalEvent,
  type JournalEventOf,
  type JournalEventType,
  type Subjects,
} from '@toolgate/contracts';
import { Attr, injectTraceContext, producerSpan } from '@toolgate/telemetry';
import { AckedPublisher } from './acked-publisher';
import { DirectGets } from './direct-get';
import { isTransitionTaken } from './nats-errors';

/** The result of appending one event. */
export type AppendResult =
  | { appended: true; seq: number; duplicate: boolean }
  /** A once-per-dispatch transition of this type is already recorded (the broker refused ours). */
  | { appended: false; seq?: undefined; duplicate?: undefined };

/** An event read back from the journal, with its stream sequence. */
export interface StoredEvent<E extends JournalEvent = JournalEvent> {
  event: E;
  seq: number;
  /** When the broker stored it (its clock, not the publisher's `at`, which the publisher chose). */
  storedAt: Date;
  /** Its message headers: the trace context it was published in (a parked call resumes it). */
  headers: MsgHdrs | undefined;
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

const encoder = new TextEncoder();

/**
 * Appends events to the journal stream and reads single events back by subject. The only writer
 * API services use, so every publish gets its `Nats-Msg-Id` (dedupe of retried publishes), the
 * once-per-dispatch expectation, and the caller's trace context in its headers.
 */
export class JournalPublisher {
  private readonly acked: AckedPublisher;
  private readonly direct: DirectGets;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
  ) {
    this.acked = new AckedPublisher(nc);
    this.direct = new DirectGets(nc);
  }

  /**
   * Publishes `event`. A once-per-dispatch type whose transition is already recorded, or an append
   * whose `lastSubjectSequence` does not hold, returns `{ appended: false }` instead of throwing:
   * that is how racing writers learn they lost.
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
        const headers = injectTraceContext(options.headers ?? natsHeaders());
        const lastSubjectSequence = ONCE_PER_DISPATCH.has(event.type)
          ? 0
          : options.lastSubjectSequence;
        try {
          const ack = await this.acked.publish(subject, encoder.encode(JSON.stringify(event)), {
            msgID: event.id,
            headers,
            ...(lastSubjectSequence !== undefined ? { lastSubjectSequence } : {}),
          });
          return { appended: true, seq: ack.seq, duplicate: ack.duplicate };
        } catch (err) {
          if (isTransitionTaken(err)) return { appended: false };
          throw err;
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
  ): Promise<StoredEvent<JournalEventOf<T>> | null> {
    const msg = await this.direct.get(this.subjects.journal.stream, {
      last_by_subj: this.subjects.journal.event(tenant, runId, key, type),
    });
    if (!msg) return null;
    // Anything else on the subject (not JSON, not an event) reads as nothing recorded.
    const event = decodeJournalEvent(msg.data);
    if (!event || event.type !== type) return null;
    return {
      event: event as JournalEventOf<T>,
      seq: msg.seq,
      storedAt: msg.time,
      headers: msg.header,
    };
  }

  /**
   * Where the last message on an event's subject sits, read or not: its sequence and when it was
   * stored. For a compare-and-set on a subject whose last message {@link last} cannot read (not an
   * event, or one this version refuses), so an unreadable message can still be superseded.
   */
  async lastPosition(
    tenant: string,
    runId: string,
    key: string,
    type: JournalEventType,
  ): Promise<{ seq: number; storedAt: Date } | null> {
    const msg = await this.direct.get(this.subjects.journal.stream, {
      last_by_subj: this.subjects.journal.event(tenant, runId, key, type),
    });
    return msg ? { seq: msg.seq, storedAt: msg.time } : null;
  }

  /** Fails appends still waiting for their ack (their outcome is unknown; a retry is deduplicated) and reads waiting for theirs. */
  close(): void {
    this.acked.close();
    this.direct.close();
  }
}
