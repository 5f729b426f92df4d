import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import { connectionState, type ConnectionState } from './connection-state';
import { headersOf } from './lean-headers';

/** How often waiting requests are checked for a missed deadline. */
const SWEEP_MS = 50;

interface Waiting {
  resolve(msg: Msg): void;
  reject(err: Error): void;
  subject: string;
  timeoutMs: number;
  deadline: number;
}

/** A request that no subscriber was listening to (the broker's 503 status). */
export class NoRespondersError extends Error {
  override readonly name = 'NoRespondersError';
  constructor(subject: string) {
    super(`no responders on ${subject}`);
  }
}

/** A request whose reply did not come before its deadline. */
export class RequestTimeoutError extends Error {
  override readonly name = 'TimeoutError';
  constructor(timeoutMs: number) {
    super(`no reply within ${timeoutMs} ms`);
  }
}

/** The connection (or this requester) closed before the reply came. */
export class RequestClosedError extends Error {
  override readonly name = 'ClosedConnectionError';
}

/**
 * A request that was not sent because the connection to the broker is down: the client would drop
 * it when it reconnects (it clears what it buffered on every dial), so the peer never gets it and
 * waiting for its deadline only delays the answer. Named like the client's own connection errors.
 */
export class RequestNotSentError extends Error {
  override readonly name = 'ConnectionError';
}

/**
 * Throws at once when nothing sent on `nc` now could reach the broker: the client buffers what is
 * sent while it reconnects and clears that buffer on every dial, so a write or request made then
 * is dropped unseen and its caller would only wait out its timeout. The error is the one
 * `messagingFailure` maps to `unavailable`.
 */
export function assertSendable(nc: NatsConnection, what: string): void {
  if (nc.isClosed())
    throw new RequestClosedError(`${what} not sent: the NATS connection is closed`);
  if (!connectionState(nc).up)
    throw new RequestNotSentError(`${what} not sent: the NATS connection is reconnecting`);
}

/**
 * Request/reply over ONE long-lived inbox subscription, replies correlated by a token in the reply
 * subject — what `nc.request` does, without what it costs on a hot path: it allocates two errors (a
 * timeout error up front and a cancellation error on every completion) and a timer per call, which
 * measured ~6% of the dispatch path's CPU. Deadlines are swept together instead.
 *
 * Rejects with `NoRespondersError` when nobody listens, `RequestTimeoutError` (name `TimeoutError`)
 * after the deadline, `RequestNotSentError` at once while the connection is down, and
 * `RequestClosedError` once the connection or this requester is closed.
 */
export class InboxRequests {
  private readonly inbox = createInbox();
  private readonly waiting = new Map<string, Waiting>();
  private sub: Subscription | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private next = 0;
  private readonly connection: ConnectionState;

  constructor(private readonly nc: NatsConnection) {
    this.connection = connectionState(nc);
  }

  request(
    subject: string,
    data: Uint8Array,
    options: { timeoutMs: number; headers?: MsgHdrs },
  ): Promise<Msg> {
    if (this.nc.isClosed() || !this.connection.up) {
      try {
        assertSendable(this.nc, `a request to ${subject}`);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }
    this.sub ??= this.nc.subscribe(`${this.inbox}.*`, {
      callback: (err, msg) => {
        if (!err) this.settle(msg);
      },
    });
    const token = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const { timeoutMs } = options;
      this.waiting.set(token, {
        resolve,
        reject,
        subject,
        timeoutMs,
        deadline: Date.now() + timeoutMs,
      });
      this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS);
      try {
        this.nc.publish(subject, data, {
          reply: `${this.inbox}.${token}`,
          ...(options.headers ? { headers: options.headers } : {}),
        });
      } catch (err) {
        this.waiting.delete(token);
        reject(err as Error);
      }
    });
  }

  /** Fails every request still waiting and drops the inbox subscription. */
  close(): void {
    this.failAll(new RequestClosedError('closed before the reply came'));
    this.sub?.unsubscribe();
    this.sub = undefined;
  }

  private settle(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length + 1);
    const w = this.waiting.get(token);
    if (!w) return; // answered after its deadline
    this.waiting.delete(token);
    if (!this.waiting.size) this.stopSweeping();
    if (msg.data.length === 0 && headersOf(msg)?.code === 503)
      w.reject(new NoRespondersError(w.subject));
    else w.resolve(msg);
  }

  private sweep(): void {
    if (this.nc.isClosed()) {
      this.failAll(new RequestClosedError('the NATS connection closed before the reply came'));
      return;
    }
    const now = Date.now();
    for (const [token, w] of this.waiting) {
      if (w.deadline > now) continue;
      this.waiting.delete(token);
      w.reject(new RequestTimeoutError(w.timeoutMs));
    }
    if (!this.waiting.size) this.stopSweeping();
  }

  private failAll(err: Error): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
    this.stopSweeping();
  }

  private stopSweeping(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
