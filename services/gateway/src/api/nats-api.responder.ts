import { Match, type NatsConnection } from '@nats-io/transport-node';
import { ApiOperation, type Subjects } from '@toolgate/contracts';
import { serveRequests, type ServedEndpoints } from '@toolgate/service-kit';
import type { GatewayApi } from './gateway-api';

/**
 * Serves every gateway operation over NATS request/reply on `subjects.api(op)`, in a queue group so
 * gateway replicas share the load. The bearer token travels in the `Authorization` header, its
 * name matched in any case (as HTTP does; many clients lower-case header names).
 */
export function serveNatsApi(
  nc: NatsConnection,
  subjects: Subjects,
  api: GatewayApi,
): ServedEndpoints {
  return serveRequests(
    nc,
    `${subjects.prefix}-gateway`,
    Object.values(ApiOperation).map((operation) => ({
      subject: subjects.api(operation),
      handle: (body, msg) =>
        api.call(operation, msg.headers?.get('Authorization', Match.IgnoreCase) || undefined, body),
    })),
  );
}
