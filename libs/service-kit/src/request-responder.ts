import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { headersOf, messagingFailure } from '@toolgate/bus';
import {
  ConfigError,
  ErrorCode,
  ToolgateError,
  toWireError,
  type ServiceIdentity,
  type ServiceKeys,
  type UntrustedReason,
} from '@toolgate/contracts';
import { Attr, consumerSpan, recordFailure } from '@toolgate/telemetry';
import { ZodError } from 'zod';

const decoder = new TextDecoder();

/** A NATS request/reply endpoint served by {@link serveRequests}. */
export interface RequestEndpoint {
  subject: string;
  /**
   * An internal endpoint: only requests signed for this service by one of these identities are
   * answered (see {@link checkSignedRequest}); the rest get `unauthorized` before their body is read.
   */
  signedBy?: readonly ServiceIdentity[];
  /**
   * The span's destination for a request received on `subject` (default: the endpoint's
   * `subject`). An endpoint on a wildcard names the operations it knows, and keeps the names of
   * the rest (any subject a client makes up) out of span names.
   */
  destination?(subject: string): string;
  /** Answers one request's JSON body (`{}` when empty); throw a typed error to refuse it. */
  handle(body: unknown, msg: Msg): Promise<unknown>;
}

/** What {@link serveRequests} needs for endpoints with `signedBy`. */
export interface ServeRequestsOptions {
  keys?: ServiceKeys;
  /** Called once per request refused as unsigned, wrongly signed or replayed (metrics). Must not throw. */
  onUntrusted?(reason: UntrustedReason): void;
}

/**
 * Refuses a request that is not signed for `keys`' identity by one of `requesters` within the
 * allowed age, or that repeats one already accepted (`replayed`): an `unauthorized` error saying
 * why, never naming a key, counted through `onUntrusted`. `unavailable` (retryable) when `keys`
 * remembers as many recent requests as it may (`ServiceKeys.verifyRequest`).
 */
export function checkSignedRequest(
  keys: ServiceKeys,
  msg: Pick<Msg, 'subject' | 'data' | 'headers'>,
  requesters: readonly ServiceIdentity[],
  onUntrusted?: (reason: UntrustedReason) => void,
): ServiceIdentity {
  const check = keys.verifyRequest(msg.subject, msg.data, headersOf(msg), requesters);
  if (check.ok) return check.signer;
  try {
    onUntrusted?.(check.reason);
  } catch {
    // Metrics must not change the answer.
  }
  throw new ToolgateError(
    ErrorCode.Unauthorized,
    `this is an internal request: it must be signed by ${requesters.join(' or ')} (${check.reason})`,
    { details: { reason: check.reason } },
  );
}

/** Room left under `max_payload` for the reply's headers (its trace context, a signature). */
const REPLY_HEADROOM_BYTES = 8 * 1024;

/** Running endpoints: `stop()` takes no new requests and waits for the ones in flight. */
export interface ServedEndpoints {
  stop(): Promise<void>;
}

/**
 * Serves request/reply endpoints in one queue group (replicas share the load), each request in a
 * CONSUMER span continuing the caller's trace. Replies are `{ ok: true, data }` or
 * `{ ok: false, error: { code, message, details } }`: a body that is not JSON or does not match its
 * schema is `invalid-request`, and an unexpected failure is `internal` without its message.
 * Throws a {@link ConfigError}, before subscribing to anything, when an endpoint answers only signed
 * requests (`signedBy`) and `options.keys` is missing: it could never answer one.
 */
export function serveRequests(
  nc: NatsConnection,
  queue: string,
  endpoints: readonly RequestEndpoint[],
  options: ServeRequestsOptions = {},
): ServedEndpoints {
  const { keys } = options;
  const signed = endpoints.filter((e) => e.signedBy).map((e) => e.subject);
  if (signed.length && !keys) {
    throw new ConfigError(
      `${signed.join(', ')} answer only signed requests, and no signing keys were given to verify them`,
      { details: { subjects: signed } },
    );
  }
  const inFlight = new Set<Promise<void>>();
  const subscriptions = endpoints.map(({ subject, handle, signedBy, destination }) =>
    nc.subscribe(subject, {
      queue,
      callback: (err, msg) => {
        if (err) return;
        const spanDestination = destination ? destination(msg.subject) : subject;
        const task = consumerSpan(spanDestination, headersOf(msg), {}, async (span) => {
          let reply: unknown;
          try {
            if (signedBy) checkSignedRequest(keys!, msg, signedBy, options.onUntrusted);
            reply = { ok: true, data: await handle(decodeBody(msg.data), msg) };
          } catch (e) {
            const error =
              e instanceof ZodError
                ? { code: ErrorCode.InvalidRequest, message: 'malformed request body' }
                : // A broker the handler could not reach is `unavailable`, never `internal`.
                  toWireError(messagingFailure(e, 'the message broker') ?? e);
            span.setAttribute(Attr.ErrorCode, error.code);
            // The reply hides an unexpected failure's message; the span is where it is kept.
            if (error.code === ErrorCode.Internal) recordFailure(span, e);
            reply = { ok: false, error };
          }
          if (!msg.reply) return;
          let bytes: Uint8Array = Buffer.from(JSON.stringify(reply));
          // A reply the broker would refuse is never dropped in silence (the caller would wait
          // out its timeout and hear `unavailable`): it is answered as `too-large`, and recorded.
          const max = nc.info?.max_payload;
          if (max !== undefined && bytes.length > max - REPLY_HEADROOM_BYTES) {
            span.setAttribute(Attr.ErrorCode, ErrorCode.TooLarge);
            recordFailure(
              span,
              new Error(`reply of ${bytes.length} bytes over max_payload ${max}`),
            );
            bytes = Buffer.from(
              JSON.stringify({
                ok: false,
                error: {
                  code: ErrorCode.TooLarge,
                  message: 'the answer is too large for the message broker',
                  details: { bytes: bytes.length, maxPayload: max },
                },
              }),
            );
          }
          msg.respond(bytes);
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
