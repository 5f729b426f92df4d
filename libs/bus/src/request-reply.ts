import { type NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  fromWireError,
  tolerantReader,
  ToolgateError,
  type ServiceIdentity,
  type ServiceKeys,
} from '@toolgate/contracts';
import { injectTraceContext } from '@toolgate/telemetry';
import type { z } from 'zod';
import { isNoResponders, messagingFailure } from './nats-errors';
import { leanHeaders } from './lean-headers';

/** Options of {@link requestReply}. */
export interface RequestReplyOptions<S extends z.ZodType> {
  /**
   * The shape of a successful reply (`{ ok: true, ... }`). Read as a tolerant reader: fields this
   * release does not know are dropped, so a newer peer can add some.
   */
  ok: S;
  timeoutMs: number;
  /** Who answers, for messages: `the gateway`, `the journal service`. */
  peer: string;
  /** Message headers to send (a bearer token); trace context is added. */
  headers?: Readonly<Record<string, string>>;
  /**
   * An internal request: signed with the sender's keys for the responder (`ServiceKeys.signRequest`),
   * which refuses it as `unauthorized` otherwise.
   */
  sign?: { keys: ServiceKeys; responder: ServiceIdentity };
  /**
   * Nobody serving the subject (the broker's "no responders": a rolling restart, the responder's
   * connection moving to another node) is asked again, with a growing pause, until `timeoutMs`
   * has passed since the first send — instead of failing at once. Such a request reached nobody,
   * so sending it again is safe for any call. The SDK's calls to the gateway do.
   */
  waitForResponder?: boolean;
}

/** The pause before asking again after "no responders" (see `waitForResponder`): 50 ms doubling to 500. */
function noRespondersPauseMs(attempt: number): number {
  return Math.min(500, 50 * 2 ** attempt);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const readers = new WeakMap<z.ZodType, z.ZodType>();

/**
 * One request/reply call to a Toolgate service over core NATS, with JSON both ways and replies
 * `{ ok: true, ... }` or `{ ok: false, error: WireError }`. What the caller gets is one thing to
 * check, `err.code`:
 * - the successful reply, parsed with `options.ok`;
 * - `{ ok: false, error }` → that typed error (`fromWireError`; a code this release does not know
 *   is `internal`, never a parse failure);
 * - nobody serving the subject, no answer within `timeoutMs`, a closed connection → `unavailable`
 *   (retryable), a request over the broker's `max_payload` → `too-large` ({@link messagingFailure});
 * - a reply that is not JSON or not either shape → `internal`.
 *
 * The SDK's gateway calls, the gateway's journal queries and the executor's worktree requests are
 * all this function.
 */
export async function requestReply<S extends z.ZodType>(
  nc: NatsConnection,
  subject: string,
  body: unknown,
  options: RequestReplyOptions<S>,
): Promise<z.output<S>> {
  const who = `${options.peer} (${subject})`;
  const headers = leanHeaders();
  for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value);
  const payload = encoder.encode(JSON.stringify(body));
  options.sign?.keys.signRequest(subject, options.sign.responder, payload, headers);
  const traced = injectTraceContext(headers);
  const deadline = Date.now() + options.timeoutMs;
  let data: Uint8Array;
  for (let attempt = 0; ; attempt++) {
    try {
      const reply = await nc.request(subject, payload, {
        timeout: Math.max(1, deadline - Date.now()),
        headers: traced,
      });
      data = reply.data;
      break;
    } catch (err) {
      const pauseMs = noRespondersPauseMs(attempt);
      if (options.waitForResponder && isNoResponders(err) && Date.now() + pauseMs < deadline) {
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
        continue;
      }
      throw (
        messagingFailure(err, who) ??
        new ToolgateError(ErrorCode.Unavailable, `${who} is not reachable; retry later`, {
          cause: err,
        })
      );
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(data));
  } catch (cause) {
    throw new ToolgateError(ErrorCode.Internal, `${who} replied with something that is not JSON`, {
      cause,
    });
  }
  if (typeof json === 'object' && json !== null && (json as { ok?: unknown }).ok === false) {
    throw fromWireError((json as { error?: unknown }).error);
  }
  const parsed = readerOf(options.ok).safeParse(json);
  if (!parsed.success) throw new ToolgateError(ErrorCode.Internal, `malformed reply from ${who}`);
  return parsed.data as z.output<S>;
}

function readerOf(schema: z.ZodType): z.ZodType {
  let reader = readers.get(schema);
  if (!reader) readers.set(schema, (reader = tolerantReader(schema)));
  return reader;
}
