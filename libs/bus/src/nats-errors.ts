import { JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';

/** JetStream API error codes Toolgate acts on (see nats-server's errors.json). */
export const JsApiCode = {
  StreamNameInUse: 10058,
  ConsumerNotFound: 10014,
  StreamNotFound: 10059,
  /** The message is larger than the stream's `max_msg_size`. */
  MessageTooLarge: 10054,
  ConsumerNameExists: 10013,
  /** `expect.lastSubjectSequence` did not hold: the once-per-dispatch transition already happened. */
  WrongLastSequence: 10071,
  /**
   * The meta leader found too few peers to place a stream's replicas on: in a cluster that is
   * still forming, until every node has joined it and told it what it can store.
   */
  ClusterNoPeers: 10005,
  /** A stream's creation failed in the broker (with status 500: it could not make its storage). */
  StreamCreateFailed: 10049,
} as const;
export type JsApiCode = (typeof JsApiCode)[keyof typeof JsApiCode];

/** Whether `err` is a JetStream API error with the given code. */
export function isJsApiError(err: unknown, code: JsApiCode): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

/** Whether the broker refused a once-per-dispatch transition because one is already recorded. */
export function isTransitionTaken(err: unknown): boolean {
  return isJsApiError(err, JsApiCode.WrongLastSequence);
}

/** Error names of the NATS client (and of `InboxRequests`) that mean: the peer or broker is not there. */
const UNREACHABLE_NAMES: ReadonlySet<string> = new Set([
  'TimeoutError',
  'NoResponders',
  'NoRespondersError',
  'ConnectionError',
  'ClosedConnectionError',
  'DrainingConnectionError',
  'RequestError',
  'JetStreamNotEnabled',
]);

/**
 * The typed error for a failure of the messaging itself, or undefined when `err` is anything else
 * (a typed error, a bug): `peer` (the message broker, a service) not answering in time, nobody
 * subscribed, the connection closed or draining → `unavailable` (retryable: a retried submission
 * is deduplicated by its key); a message over the broker's `max_payload` → `too-large`. Edges map
 * an operation's failure through it once, so an outage never answers `internal`. The NATS error
 * stays the cause, out of the wire form.
 *
 * Errors raised by the NATS client in this process are matched by name (the client names them),
 * never across a process boundary.
 */
export function messagingFailure(err: unknown, peer: string): ToolgateError | undefined {
  if (err instanceof ToolgateError || !(err instanceof Error)) return undefined;
  if (err.name === 'InvalidArgumentError' && /max_payload/.test(err.message)) {
    return new ToolgateError(
      ErrorCode.TooLarge,
      'too large for the message broker (over its max_payload)',
      { cause: err },
    );
  }
  // A JetStream 5xx — 503 (`err_code` 10008) while a stream or the meta group has no leader (an
  // election longer than the caller's budget), a 500 from a server mid-change — is the broker's
  // trouble, retryable, not a bug.
  if (err instanceof JetStreamApiError && err.status >= 500) {
    const why = err.status === 503 ? 'is electing a leader' : 'could not serve it';
    return new ToolgateError(ErrorCode.Unavailable, `${peer} ${why}; retry later`, { cause: err });
  }
  if (UNREACHABLE_NAMES.has(err.name)) {
    const why = err.name === 'TimeoutError' ? 'did not answer in time' : 'is not reachable';
    return new ToolgateError(ErrorCode.Unavailable, `${peer} ${why}; retry later`, {
      cause: err,
    });
  }
  return undefined;
}

/**
 * Whether a request reached nobody: no subscriber on its subject (the broker's "no responders",
 * which `nc.request` wraps in a `RequestError`). Matched by name, as {@link messagingFailure} does.
 */
export function isNoResponders(err: unknown): boolean {
  const named = (e: unknown) =>
    e instanceof Error && (e.name === 'NoResponders' || e.name === 'NoRespondersError');
  return named(err) || (err instanceof Error && err.name === 'RequestError' && named(err.cause));
}

/**
 * Whether the broker refused a publish or a request for the connection's permissions (its NATS
 * user may not publish to that subject). A request fails with a `RequestError` whose cause is the
 * violation, so the cause chain is walked. Matched by name, as {@link messagingFailure} does.
 */
export function isPermissionViolation(err: unknown): boolean {
  for (let link: unknown = err, depth = 0; link && depth < 4; depth++) {
    if (link instanceof Error && link.name === 'PermissionViolationError') return true;
    link = (link as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Whether a publish was refused for what it is — larger than the server's `max_payload` (refused by
 * the client before sending) or the stream's maximum message size — so publishing it again
 * unchanged fails the same way. Any other failure (no ack in time, no responders while a stream
 * leader is elected, a reconnecting connection) may pass on a retry.
 */
export function isPublishRefused(err: unknown): boolean {
  return (
    isJsApiError(err, JsApiCode.MessageTooLarge) ||
    (err instanceof Error && err.name === 'InvalidArgumentError' && /max_payload/.test(err.message))
  );
}

/**
 * Whether a pull (`consumer.fetch`) ended because the broker's idle heartbeats stopped: the client
 * gives up on a pull request after two missed heartbeats (its way to notice a request the broker
 * ended without a status). Nothing is wrong with the broker or the connection, and messages may be
 * waiting meanwhile: the next pull goes out at once.
 */
export function isPullHeartbeatLost(err: unknown): boolean {
  return err instanceof JetStreamError && err.message === 'heartbeats missed';
}
