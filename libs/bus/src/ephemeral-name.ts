import { randomBytes } from 'node:crypto';

/**
 * A name for a short-lived consumer a client creates for itself (a what-if's replay, an
 * operator's count): `<purpose>-<16 hex digits>`. Creating a consumer under a name puts the name
 * in the API subject (`$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`), which NATS permissions
 * can allow while denying the durable consumers' names. The nameless form
 * (`$JS.API.CONSUMER.CREATE.<stream>`) cannot be told apart from a request that names a durable
 * consumer in its body — which nats-server 2.9 takes as a change of that consumer's settings —
 * so deploy/nats/nats.conf grants it to nobody.
 */
export function ephemeralName(purpose: string): string {
  return `${purpose}-${randomBytes(8).toString('hex')}`;
}
