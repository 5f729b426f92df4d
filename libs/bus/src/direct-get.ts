import {
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import { retryThroughElection, type ElectionRetryOptions } from './election-retry';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { InboxRequests } from './inbox-requests';
import { headersOf, leanHeaders } from './lean-headers';

/**
 * Where a read is answered: by any replica (the direct get; the reader's own server's first) or by
 * the stream's leader, which has applied every write it acknowledged.
 */
export type ReadFrom = 'replica' | 'leader';

/** A message read from a stream by a direct get. */
export interface DirectMessage {
  /** The subject it was stored on. */
  subject: string;
  seq: number;
  /** When the broker stored it (the broker's clock). */
  time: Date;
  data: Uint8Array;
  /** Its headers, with the broker's `Nats-*` ones. */
  header: MsgHdrs;
}

/** What to read: the last message on a subject, or the message at (or, with a subject, after) a sequence. */
export type DirectQuery = { last_by_subj: string } | { seq: number; next_by_subj?: string };

const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

/**
 * How long a stream's replica count is taken as read before its info is asked again: a stream
 * moved from one replica to three goes back to the leader's message get within this.
 */
export const REPLICAS_TTL_MS = 5_000;

/**
 * How long a stream's info may take (a loaded cluster's meta layer answers it); the message get
 * API is used meanwhile.
 */
const INFO_TIMEOUT_MS = 5_000;

/** Whether a stream's leader is its only replica, as its info said when `at`. */
interface ReplicaCount {
  only: boolean;
  at: number;
  /** A read of its info is under way. */
  reading: boolean;
}

/** The JetStream API's "no message found" error code (a 404). */
const NO_MESSAGE_FOUND = 10037;

/** The stream leader's answer to `$JS.API.STREAM.MSG.GET.<stream>`. */
interface StreamMsgGetReply {
  message?: { subject: string; seq: number; hdrs?: string; data?: string; time: string };
  error?: { code: number; err_code?: number; description?: string };
}

/**
 * A direct get that failed at the broker (other than "no message"), a {@link ToolgateError} with
 * the broker's status and text in `details`. The broker answers a direct get it cannot parse or
 * that names no message with a 408 ("Empty Request", "Malformed Request", "Bad Request" — not a
 * timeout), and this client builds every query, so a 4xx, or an answer without headers, is a bug:
 * `internal`, and retrying it unchanged fails the same way. A 5xx is the broker's own trouble:
 * `unavailable`, retryable.
 */
export class DirectGetError extends ToolgateError {
  constructor(
    readonly status: number,
    description: string,
  ) {
    super(
      status >= 500 ? ErrorCode.Unavailable : ErrorCode.Internal,
      `direct get failed: ${status} ${description}`,
      { details: { status, description } },
    );
    this.name = 'DirectGetError';
  }
}

/**
 * Reads of single stream messages, from any replica or from the stream's leader.
 *
 * {@link get} is a direct get (`$JS.API.DIRECT.GET.<stream>`), the wire protocol of the JetStream client's
 * `jsm.direct.getMessage` — a last-by-subject read names the subject in the request subject, so
 * subject permissions apply to it — with the replies taken over {@link InboxRequests} instead of
 * `nc.request`. Every dispatch makes several of these reads (the recorded request, the settlement,
 * the error streak); `nc.request` allocates a timer and two errors for each one (see
 * `InboxRequests`). A message that is not there is `null`.
 */
export class DirectGets {
  private readonly requests: InboxRequests;
  /** Per stream: whether its leader is its only replica (see {@link leaderOnly}). */
  private readonly replicas = new Map<string, ReplicaCount>();
  /** The streams whose advisories are heard (see {@link leaderOnly}). */
  private readonly advisories = new Map<string, Subscription>();

  constructor(
    private readonly nc: NatsConnection,
    /** How long a read keeps trying through an election (see {@link retryThroughElection}). */
    private readonly retry: ElectionRetryOptions = {},
    /** How long a stream's replica count is taken as read (see {@link fromLeader}). */
    private readonly replicasTtlMs = REPLICAS_TTL_MS,
  ) {
    this.requests = new InboxRequests(nc);
  }

  async get(stream: string, query: DirectQuery): Promise<DirectMessage | null> {
    const last = 'last_by_subj' in query;
    const msg = await this.request(
      last ? `$JS.API.DIRECT.GET.${stream}.${query.last_by_subj}` : `$JS.API.DIRECT.GET.${stream}`,
      last ? EMPTY : Buffer.from(JSON.stringify(query)),
    );
    const header = headersOf(msg);
    if (!header) throw new DirectGetError(0, 'the broker answered without headers');
    if (header.code === 404) return null;
    if (header.code !== 0) throw new DirectGetError(header.code, header.description);
    return {
      subject: header.last('Nats-Subject'),
      seq: Number(header.last('Nats-Sequence')),
      time: new Date(Date.parse(header.last('Nats-Time-Stamp'))),
      data: msg.data,
      header,
    };
  }

  /** {@link get} (`replica`) or {@link fromLeader} (`leader`). */
  read(
    stream: string,
    query: DirectQuery,
    from: ReadFrom = 'replica',
  ): Promise<DirectMessage | null> {
    return from === 'leader' ? this.fromLeader(stream, query) : this.get(stream, query);
  }

  /**
   * The same read as {@link get}, answered by the stream's leader (see the class's comment). On a
   * stream whose leader is its only replica (R1: one node, the all-in-one) that is what a direct
   * get is — the leader stores a message before it acknowledges it — at a third of the broker's
   * work of the message get API (JSON and base64 both ways); the replica count is read from the
   * stream's info, again after {@link REPLICAS_TTL_MS}, and while it cannot be read the API is used.
   */
  async fromLeader(stream: string, query: DirectQuery): Promise<DirectMessage | null> {
    if (this.leaderOnly(stream)) return this.get(stream, query);
    // A stream with no leader (an election) leaves the API's request unanswered or answers 503:
    // both are tried again, within the budget.
    const { value: reply } = await retryThroughElection(async (timeoutMs) => {
      const msg = await this.requests.request(
        `$JS.API.STREAM.MSG.GET.${stream}`,
        Buffer.from(JSON.stringify(query)),
        { timeoutMs },
      );
      const parsed = parseMsgGetReply(msg.data);
      if (parsed.error?.code === 503) throw new JetStreamApiError(parsed.error as never);
      return parsed;
    }, this.retry);
    if (reply.error) {
      if (reply.error.err_code === NO_MESSAGE_FOUND) return null;
      throw new DirectGetError(reply.error.code, reply.error.description ?? 'error');
    }
    const stored = reply.message;
    if (!stored) throw new DirectGetError(0, 'the broker answered a message get without a message');
    const header = stored.hdrs ? decodeHeaders(Buffer.from(stored.hdrs, 'base64')) : leanHeaders();
    return {
      subject: stored.subject,
      seq: stored.seq,
      time: new Date(Date.parse(stored.time)),
      data: stored.data ? new Uint8Array(Buffer.from(stored.data, 'base64')) : EMPTY,
      header,
    };
  }

  /**
   * Whether `stream`'s leader is its only replica, as last read (false until then, and when it
   * cannot be read): never waited for — the stream's info is read beside the reads, again once it
   * is {@link REPLICAS_TTL_MS} old. A stream given more replicas (the journal raises them at its
   * start) lets a new follower answer direct gets once 90 % caught up — never soon after the
   * change: the stream's advisories (an update, a leader elected), heard from before its info is
   * first asked for, end the direct reads at once; the info read again covers an advisory missed
   * (a reconnect).
   */
  private leaderOnly(stream: string): boolean {
    const known = this.replicas.get(stream);
    if (!known || (!known.reading && Date.now() - known.at >= this.replicasTtlMs))
      this.readReplicas(stream, known);
    return known?.only ?? false;
  }

  private readReplicas(stream: string, known: ReplicaCount | undefined): void {
    const state: ReplicaCount = known ?? { only: false, at: 0, reading: false };
    state.reading = true;
    this.replicas.set(stream, state);
    // Heard from before the info is asked for (one connection keeps its order): a change made
    // after the info was read is never missed.
    this.hearAdvisories(stream);
    void this.requests
      .request(`$JS.API.STREAM.INFO.${stream}`, EMPTY, { timeoutMs: INFO_TIMEOUT_MS })
      .then((msg) => {
        const info = JSON.parse(decoder.decode(msg.data)) as {
          config?: { num_replicas?: number };
        };
        return info.config?.num_replicas === 1;
      })
      .catch(() => false)
      .then((one) => {
        // An advisory heard meanwhile replaced the state: this answer may be from before it.
        if (this.replicas.get(stream) !== state) return;
        Object.assign(state, { only: one, at: Date.now(), reading: false });
      });
  }

  private hearAdvisories(stream: string): void {
    if (this.advisories.has(stream) || this.nc.isClosed()) return;
    // On nats-server 2.9 a move to more replicas may send no update advisory (the stream is not
    // its leader while it updates), but its new group elects a leader before a follower catches up.
    const sub = this.nc.subscribe(`$JS.EVENT.ADVISORY.STREAM.*.${stream}`, {
      // Whatever happened: leader reads until the info is read again, a TTL from now.
      callback: () => {
        this.replicas.set(stream, { only: false, at: Date.now(), reading: false });
      },
    });
    this.advisories.set(stream, sub);
  }

  /** A request, sent again while the connection moves to another node or no replica answers. */
  private async request(subject: string, data: Uint8Array): Promise<Msg> {
    const { value } = await retryThroughElection(
      (timeoutMs) => this.requests.request(subject, data, { timeoutMs }),
      this.retry,
    );
    return value;
  }

  /** Fails the reads still waiting for their answer. */
  close(): void {
    this.requests.close();
    for (const sub of this.advisories.values()) sub.unsubscribe();
    this.advisories.clear();
  }
}

function parseMsgGetReply(data: Uint8Array): StreamMsgGetReply {
  try {
    return JSON.parse(decoder.decode(data)) as StreamMsgGetReply;
  } catch {
    throw new DirectGetError(
      0,
      'the broker answered a message get with something that is not JSON',
    );
  }
}

/**
 * A stored message's header block (`NATS/1.0\r\nName: value\r\n…\r\n\r\n`, as the message
 * get API returns it in base64) as headers, through the client's public API.
 */
function decodeHeaders(block: Uint8Array): MsgHdrs {
  const header = leanHeaders();
  const lines = decoder.decode(block).split('\r\n');
  for (const line of lines.slice(1)) {
    if (!line) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    header.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return header;
}
