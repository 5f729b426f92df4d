import { ToolgateError } from '@toolgate/contracts';

/**
 * The `ToolgateError` that `promise` rejects with, for asserting its code and details. Fails the
 * test when the promise resolves, or rejects with anything else.
 */
export async function toolgateRejection(promise: Promise<unknown>): Promise<ToolgateError> {
  const outcome = await promise.then(
    (value: unknown) => ({ resolved: value }),
    (err: unknown) => ({ rejected: err }),
  );
  if ('resolved' in outcome) {
    throw new Error(`expected a ToolgateError, but it resolved: ${String(outcome.resolved)}`);
  }
  if (!(outcome.rejected instanceof ToolgateError)) {
    throw new Error('expected a ToolgateError', { cause: outcome.rejected });
  }
  return outcome.rejected;
}
