import { JetStreamApiError } from '@nats-io/jetstream';

/** JetStream API error codes Toolgate acts on (see nats-server's errors.json). */
export const JsApiCode = {
  StreamNameInUse: 10058,
  ConsumerNotFound: 10014,
  ConsumerNameExists: 10013,
  /** `expect.lastSubjectSequence` did not hold: the once-per-dispatch transition already happened. */
  WrongLastSequence: 10071,
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
