import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ToolgateError, toWireError } from '@toolgate/contracts';
import { Attr, consumerSpan, recordFailure } from '@toolgate/telemetry';
import { ZodError } from 'zod';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A NATS request/reply endpoint served by {@link serveRequests}. */
export interface RequestEndpoint {
  subject: string;
  /** Answers one request's JSON body (`{}` when empty); throw a typed error to refuse it. */
  handle(body: unknown, msg: Msg): Promise<unknown>;
}

/** Running endpoints: `stop()` takes no new requests and waits for the ones in flight. */
export interface ServedEndpoints {
  stop(): Promise<void>;
}

/**
 * Serves request/reply endpoints in one queue group (replicas share the load), each request in a
 * CONSUMER span continuing the caller's trace. Replies are `{ ok: true, data }` or
 * `{ ok: false, error: { code, message, details } }`: a body that is not JSON or does not match its
 * schema is `invalid-request`, and an unexpected failure is `internal` without its message.
 */
export function serveRequests(
  nc: NatsConnection,
  queue: string,
  endpoints: readonly RequestEndpoint[],
): ServedEndpoints {
  const inFlight = new Set<Promise<void>>();
  const subscriptions = endpoints.map(({ subject, handle }) =>
    nc.subscribe(subject, {
      queue,
      callback: (err, msg) => {
        if (err) return;
        const task = consumerSpan(subject, msg.headers, {}, async (span) => {
          let reply: unknown;
          try {
            reply = { ok: true, data: await handle(decodeBody(msg.data), msg) };
          } catch (e) {
            const error =
              e instanceof ZodError
                ? { code: ErrorCode.InvalidRequest, message: 'malformed request body' }
                : toWireError(e);
            span.setAttribute(Attr.ErrorCode, error.code);
            // The reply hides an unexpected failure's message; the span is where it is kept.
            if (error.code === ErrorCode.Internal) recordFailure(span, e);
            reply = { ok: false, error };
          }
          if (msg.reply) msg.respond(encoder.encode(JSON.stringify(reply)));
        }).catch(() => undefined);
        inFlight.add(task);
        void task.finally(() => inFlight.delete(task));
      },
    }),
  );
  return {
    async stop() {
      for (const sub of subscriptions) sub.unsubscribe();
      await Promise.allSettled([...inFlight]);
    },
  };
}

function decodeBody(data: Uint8Array): unknown {
  if (!data.length) return {};
  try {
    return JSON.parse(decoder.decode(data)) as unknown;
  } catch {
    throw new ToolgateError(ErrorCode.InvalidRequest, 'malformed request body (expected JSON)');
  }
}
