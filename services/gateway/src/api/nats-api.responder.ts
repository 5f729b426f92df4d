import { Match, type NatsConnection } from '@nats-io/transport-node';
import { headersOf } from '@toolgate/bus';
import { ApiOperation, ErrorCode, ToolgateError, type Subjects } from '@toolgate/contracts';
import { serveRequests, type ServedEndpoints } from '@toolgate/service-kit';
import type { GatewayApi } from './gateway-api';

/** The longest piece of an unknown subject an `unknown-operation` error repeats. */
const MAX_ECHOED_OPERATION = 128;

/**
 * Serves every gateway operation over NATS request/reply on `subjects.api(op)`, in a queue group so
 * gateway replicas share the load. One subscription takes the whole `<prefix>.api.>` space: a
 * request whose subject names no operation (a typo such as `dispatch.sumbit`) is answered with
 * `unknown-operation`, listing the operations there are, instead of going unanswered (the client's
 * *no responders*). A single subscription, not a wildcard beside the per-operation ones: within
 * one queue group the broker would hand a known operation to either. The bearer token travels in
 * the `Authorization` header, its name matched in any case (as HTTP does; many clients lower-case
 * header names).
 */
export function serveNatsApi(
  nc: NatsConnection,
  subjects: Subjects,
  api: GatewayApi,
): ServedEndpoints {
  return serveRequests(nc, `${subjects.prefix}-gateway`, [
    {
      subject: subjects.apiAll,
      destination: (subject) => (subjects.apiOperationOf(subject) ? subject : subjects.apiAll),
      handle: async (body, msg) => {
        const operation = subjects.apiOperationOf(msg.subject);
        if (!operation) throw unknownOperation(subjects, msg.subject);
        return api.call(
          operation,
          headersOf(msg)?.get('Authorization', Match.IgnoreCase) || undefined,
          body,
        );
      },
    },
  ]);
}

/** `unknown-operation`: what was asked for (bounded) and every operation there is; no secrets. */
function unknownOperation(subjects: Subjects, subject: string): ToolgateError {
  const asked = subject.slice(`${subjects.prefix}.api.`.length);
  const shown =
    asked.length > MAX_ECHOED_OPERATION ? `${asked.slice(0, MAX_ECHOED_OPERATION)}…` : asked;
  return new ToolgateError(
    ErrorCode.UnknownOperation,
    `unknown operation ${JSON.stringify(shown)}: the API's operations are listed in details.operations`,
    { details: { operation: shown, operations: Object.values(ApiOperation).sort() } },
  );
}
