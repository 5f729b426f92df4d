import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  ApiOperation,
  ErrorCode,
  ToolgateError,
  toWireError,
  type Subjects,
} from '@toolgate/contracts';
import { consumerSpan } from '@toolgate/telemetry';
import type { GatewayApi } from './gateway-api';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Serves every gateway operation over NATS request/reply on `subjects.api(op)`, in a queue group so
 * gateway replicas share the load. The bearer token travels in the `Authorization` header.
 * Replies are `{ ok: true, data }` or `{ ok: false, error }`.
 */
export function serveNatsApi(
  nc: NatsConnection,
  subjects: Subjects,
  api: GatewayApi,
): Subscription[] {
  return Object.values(ApiOperation).map((operation) => {
    const subject = subjects.api(operation);
    return nc.subscribe(subject, {
      queue: `${subjects.prefix}-gateway`,
      callback: (err, msg) => {
        if (err) return;
        void consumerSpan(subject, msg.headers, {}, async () => {
          let reply: unknown;
          try {
            let body: unknown = {};
            if (msg.data.length) {
              try {
                body = JSON.parse(decoder.decode(msg.data));
              } catch {
                throw new ToolgateError(
                  ErrorCode.InvalidRequest,
                  'malformed request body (expected JSON)',
                );
              }
            }
            const data = await api.call(
              operation,
              msg.headers?.get('Authorization') || undefined,
              body,
            );
            reply = { ok: true, data };
          } catch (e) {
            reply = { ok: false, error: toWireError(e) };
          }
          msg.respond(encoder.encode(JSON.stringify(reply)));
        });
      },
    });
  });
}
