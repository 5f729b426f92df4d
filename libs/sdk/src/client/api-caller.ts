import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import {
  ApiReplySchema,
  ErrorCode,
  fromWireError,
  ToolgateError,
  type ApiOperation,
  type Subjects,
} from '@toolgate/contracts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Calls one gateway operation over NATS request/reply (`subjects.api(op)`), with the bearer token
 * in the `Authorization` message header. A `{ ok: false, error }` reply rejects with the typed
 * error rebuilt by `fromWireError`; transport failures become `unavailable` / `timeout`, never a
 * raw NATS error, so callers check one thing: `err.code`.
 */
export class ApiCaller {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly token: string,
    private readonly timeoutMs: number,
  ) {}

  async call<T>(operation: ApiOperation, body: unknown = {}): Promise<T> {
    const h = natsHeaders();
    h.set('Authorization', `Bearer ${this.token}`);
    let reply;
    try {
      reply = await this.nc.request(
        this.subjects.api(operation),
        encoder.encode(JSON.stringify(body)),
        {
          timeout: this.timeoutMs,
          headers: h,
        },
      );
    } catch (cause) {
      throw transportError(operation, cause, this.timeoutMs);
    }
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(reply.data));
    } catch (cause) {
      throw new ToolgateError(
        ErrorCode.Internal,
        `the gateway replied to ${operation} with something that is not JSON`,
        { cause },
      );
    }
    const parsed = ApiReplySchema.safeParse(json);
    if (!parsed.success) {
      throw new ToolgateError(ErrorCode.Internal, `malformed gateway reply to ${operation}`);
    }
    if (parsed.data.ok) return parsed.data.data as T;
    throw fromWireError(parsed.data.error);
  }
}

/** NATS v3 names its errors; match on the name and message, never on the class (it may be a copy). */
function transportError(operation: string, cause: unknown, timeoutMs: number): ToolgateError {
  const name = (cause as { name?: unknown })?.name;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (name === 'NoRespondersError' || /no responders/i.test(message)) {
    return new ToolgateError(ErrorCode.Unavailable, `no gateway is serving ${operation}`, {
      cause,
    });
  }
  if (name === 'TimeoutError' || /timeout/i.test(message)) {
    return new ToolgateError(
      ErrorCode.Timeout,
      `the gateway did not answer ${operation} within ${timeoutMs} ms`,
      { cause },
    );
  }
  return new ToolgateError(ErrorCode.Unavailable, `request ${operation} failed: ${message}`, {
    cause,
  });
}
