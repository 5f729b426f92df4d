import {
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/transport-node';
import { JetStreamApiError, type PubAck } from '@nats-io/jetstream';
import { InboxRequests, NoRespondersError, RequestTimeoutError } from './inbox-requests';

const decoder = new TextDecoder();

/** How long a publish waits for its ack by default (the JetStream client's own default). */
const DEFAULT_ACK_TIMEOUT_MS = 5000;

/** What a JetStream publish may expect of the stream (sent as `Nats-Expected-*` headers). */
export interface AckedPublishOptions {
  /** `Nats-Msg-Id`: the stream drops a second message with the same id within its window. */
  msgID?: string;
  /** `Nats-Expected-Last-Subject-Sequence`: refused (10071) unless the subject's last sequence is this. */
  lastSubjectSequence?: number;
  headers?: MsgHdrs;
}

/**
 * JetStream publishes whose acks come back over {@link InboxRequests}: the wire protocol is the
 * JetStream client's (a PUB with a reply subject and the `Nats-*` headers, a PubAck as JSON), and so
 * are the errors — a refusal is a `JetStreamApiError` carrying the broker's `err_code`. Why not
 * `js.publish`: it is a `nc.request` (see `InboxRequests`), and every dispatch makes four appends.
 */
export class AckedPublisher {
  private readonly requests: InboxRequests;

  constructor(
    nc: NatsConnection,
    private readonly timeoutMs = DEFAULT_ACK_TIMEOUT_MS,
  ) {
    this.requests = new InboxRequests(nc);
  }

  async publish(
    subject: string,
    data: Uint8Array,
    options: AckedPublishOptions = {},
  ): Promise<PubAck> {
    const h = options.headers ?? natsHeaders();
    if (options.msgID) h.set('Nats-Msg-Id', options.msgID);
    if (options.lastSubjectSequence !== undefined)
      h.set('Nats-Expected-Last-Subject-Sequence', String(options.lastSubjectSequence));
    let msg: Msg;
    try {
      msg = await this.requests.request(subject, data, { timeoutMs: this.timeoutMs, headers: h });
    } catch (err) {
      if (err instanceof NoRespondersError)
        throw Object.assign(
          new Error(`no JetStream stream is listening on ${subject} (no responders)`),
          { name: 'NoRespondersError' },
        );
      if (err instanceof RequestTimeoutError)
        throw Object.assign(new Error(`no JetStream ack within ${this.timeoutMs} ms`), {
          name: 'TimeoutError',
        });
      throw err;
    }
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
