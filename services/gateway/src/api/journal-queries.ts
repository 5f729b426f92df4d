import type { NatsConnection } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import {
  ApiOkReplySchema,
  ServiceIdentity,
  type QueryOperation,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';

/**
 * The gateway's read side: it never opens the journal's database, it asks the journal service over
 * NATS request/reply (`subjects.query(op)`, the bus's {@link requestReply}). The tenant always
 * comes from the caller's token, and every query is signed with the gateway's keys for the
 * journal, which answers nothing else: a client on the bus cannot ask for another tenant's data.
 */
export class JournalQueries {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly timeoutMs: number,
    private readonly keys: ServiceKeys,
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
        sign: { keys: this.keys, responder: ServiceIdentity.Journal },
      },
    );
    return reply.data as T;
  }
}
