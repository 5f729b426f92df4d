import type { NatsConnection } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import { ApiOkReplySchema, type QueryOperation, type Subjects } from '@toolgate/contracts';

/**
 * The gateway's read side: it never opens the journal's database, it asks the journal service over
 * NATS request/reply (`subjects.query(op)`, the bus's {@link requestReply}). The tenant always
 * comes from the caller's token. `headers` go with every query (a service credential).
 */
export class JournalQueries {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly timeoutMs: number,
    private readonly headers: Readonly<Record<string, string>> = {},
  ) {}

  async ask<T>(
    operation: QueryOperation,
    tenant: string,
    body: Record<string, unknown>,
  ): Promise<T> {
    const reply = await requestReply(
      this.nc,
      this.subjects.query(operation),
      { ...body, tenant },
      {
        ok: ApiOkReplySchema,
        timeoutMs: this.timeoutMs,
        peer: 'the journal service',
        headers: this.headers,
      },
    );
    return reply.data as T;
  }
}
