import { type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError, type PubAck } from '@nats-io/jetstream';
import { retryThroughElection, type ElectionRetryOptions } from './election-retry';
import { InboxRequests, NoRespondersError, RequestTimeoutError } from './inbox-requests';
import { headersOf, leanHeaders } from './lean-headers';

const decoder = new TextDecoder();

/** What a JetStream publish may expect of the stream (sent as `Nats-Expected-*` headers). */
export interface AckedPublishOptions {
  /** `Nats-Msg-Id`: the stream drops a second message with the same id within its window. */
  msgID?: string;
  /** `Nats-Expected-Last-Subject-Sequence`: refused (10071) unless the subject's last sequence is this. */
  lastSubjectSequence?: number;
  headers?: MsgHdrs;
}

/** A stream's ack, and whether an earlier attempt of the same publish may have been stored. */
export type AckedPublish = PubAck & {
  /**
   * An earlier attempt of this publish got no answer (its outcome is unknown), so a `duplicate`
   * may well be that attempt's own message rather than another publisher's.
   */
  retriedUnknown: boolean;
};

/**
 * JetStream publishes whose acks come back over {@link InboxRequests}: the wire protocol is the
 * JetStream client's (a PUB with a reply subject and the `Nats-*` headers, a PubAck as JSON), and so
 * are the errors — a refusal is a `JetStreamApiError` carrying the broker's `err_code`. Why not
 * `js.publish`: it is a `nc.request` (see `InboxRequests`), and every dispatch makes four appends.
 *
 * A publish rides out a leader election: sent again with the same message id (deduplicated by
 * the stream) while the stream answers "no responders" or 503, the connection moves to another
 * node, or an ack does not come, within a budget ({@link retryThroughElection}) — a leader change
 * costs the caller latency, not an error.
 */
export class AckedPublisher {
  private readonly requests: InboxRequests;

  constructor(
    nc: NatsConnection,
    private readonly retry: ElectionRetryOptions = {},
  ) {
    this.requests = new InboxRequests(nc);
  }

  async publish(
    subject: string,
    data: Uint8Array,
    options: AckedPublishOptions = {},
  ): Promise<AckedPublish> {
    const h = options.headers ?? leanHeaders();
    if (options.msgID) h.set('Nats-Msg-Id', options.msgID);
    if (options.lastSubjectSequence !== undefined)
      h.set('Nats-Expected-Last-Subject-Sequence', String(options.lastSubjectSequence));
    const { value, earlierUnknown } = await retryThroughElection(
      (timeoutMs) => this.publishOnce(subject, data, h, timeoutMs),
      // Without a message id, an attempt that may have been stored is not sent again: the stream
      // could not tell the second from the first.
      { ...this.retry, resendUnknown: options.msgID !== undefined },
    );
    return Object.assign(value, { retriedUnknown: earlierUnknown });
  }

  private async publishOnce(
    subject: string,
    data: Uint8Array,
    h: MsgHdrs,
    timeoutMs: number,
  ): Promise<PubAck> {
    let msg: Msg;
    try {
      msg = await this.requests.request(subject, data, { timeoutMs, headers: h });
    } catch (err) {
      if (err instanceof NoRespondersError)
        throw Object.assign(
          new Error(`no JetStream stream is listening on ${subject} (no responders)`),
          { name: 'NoRespondersError' },
        );
      if (err instanceof RequestTimeoutError)
        throw Object.assign(new Error(`no JetStream ack within ${timeoutMs} ms`), {
          name: 'TimeoutError',
        });
      throw err;
    }
    // A status without a body (other than "no responders", which `InboxRequests` names): the
    // broker's own answer, classified as the API's errors are (a 5xx is its trouble, retried).
    const status = msg.data.length === 0 ? headersOf(msg) : undefined;
    if (status && status.code !== 0)
      throw new JetStreamApiError({
        code: status.code,
        err_code: 0,
        description: status.description || `status ${status.code}`,
      });
    let reply: {
      stream?: string;
      seq?: number;
      duplicate?: boolean;
      domain?: string;
      error?: ConstructorParameters<typeof JetStreamApiError>[0];
    };
    try {
      reply = JSON.parse(decoder.decode(msg.data)) as typeof reply;
    } catch {
      throw new Error('the broker answered a publish with something that is not a PubAck');
    }
    if (reply.error) throw new JetStreamApiError(reply.error);
    if (!reply.stream || typeof reply.seq !== 'number') throw new Error('invalid ack response');
    return {
      stream: reply.stream,
      seq: reply.seq,
      duplicate: reply.duplicate ?? false,
      domain: reply.domain ?? '',
    } as PubAck;
  }

  /** Fails every publish still waiting for its ack. */
  close(): void {
    this.requests.close();
  }
}
