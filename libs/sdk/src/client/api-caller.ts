import type { NatsConnection } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import { ApiOkReplySchema, type ApiOperation, type Subjects } from '@toolgate/contracts';

/**
 * Calls one gateway operation over NATS request/reply (`subjects.api(op)`), with the bearer token
 * in the `Authorization` message header: the bus's {@link requestReply}, so a `{ ok: false, error }`
 * reply rejects with the typed error and a transport failure with `unavailable` — callers check
 * one thing, `err.code`.
 */
export class ApiCaller {
  private readonly headers: Readonly<Record<string, string>>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    token: string,
    /** How long a call waits for the gateway's answer. */
    readonly timeoutMs: number,
  ) {
    this.headers = { Authorization: `Bearer ${token}` };
  }

  async call<T>(operation: ApiOperation, body: unknown = {}): Promise<T> {
    const reply = await requestReply(this.nc, this.subjects.api(operation), body, {
      ok: ApiOkReplySchema,
      timeoutMs: this.timeoutMs,
      peer: 'the gateway',
      headers: this.headers,
      // A gateway restarting (or moving to another node) is waited for within the timeout.
      waitForResponder: true,
    });
    return reply.data as T;
  }
}
