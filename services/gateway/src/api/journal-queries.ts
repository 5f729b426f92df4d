import type { NatsConnection } from '@nats-io/transport-node';
import {
  ApiReplySchema,
  ErrorCode,
  fromWireError,
  ToolgateError,
  type QueryOperation,
  type Subjects,
} from '@toolgate/contracts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The gateway's read side: it never opens the journal's database, it asks the journal service over
 * NATS request/reply (`subjects.query(op)`). The tenant always comes from the caller's token.
 */
export class JournalQueries {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly timeoutMs: number,
  ) {}

  async ask<T>(
    operation: QueryOperation,
    tenant: string,
    body: Record<string, unknown>,
  ): Promise<T> {
    let reply;
    try {
      reply = await this.nc.request(
        this.subjects.query(operation),
        encoder.encode(JSON.stringify({ ...body, tenant })),
        {
          timeout: this.timeoutMs,
        },
      );
    } catch (cause) {
      throw new ToolgateError(ErrorCode.Unavailable, 'the journal service did not answer', {
        cause,
      });
    }
    const parsed = ApiReplySchema.safeParse(parseJson(decoder.decode(reply.data)));
    if (!parsed.success) throw new ToolgateError(ErrorCode.Internal, 'malformed journal reply');
    if (parsed.data.ok) return parsed.data.data as T;
    throw fromWireError(parsed.data.error);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
