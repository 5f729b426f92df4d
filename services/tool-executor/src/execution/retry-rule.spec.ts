import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { isTransient, retryDelayMs, settledError } from './retry-rule';

describe('retry by kind', () => {
  it('backs off from 100 ms, doubling, to at most 2 s', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map(retryDelayMs)).toEqual([
      100, 200, 400, 800, 1600, 2000, 2000,
    ]);
  });

  it('treats as transient only what says it is retryable', () => {
    expect(isTransient(new ToolgateError(ErrorCode.Unavailable, 'no worker'))).toBe(true);
    expect(isTransient(new ToolgateError(ErrorCode.Timeout, 'slow'))).toBe(true);
    expect(
      isTransient(new ToolgateError(ErrorCode.Unavailable, 'down', { retryable: false })),
    ).toBe(false);
    expect(isTransient(new ToolgateError(ErrorCode.Forbidden, 'no'))).toBe(false);
    expect(isTransient(new Error('boom'))).toBe(false);
    expect(isTransient({ code: 'unavailable', message: 'wire', retryable: 'yes' })).toBe(false);
    expect(isTransient(null)).toBe(false);
  });

  it('marks the settled error with its kind, keeping the wire shape and the details', () => {
    expect(
      settledError(
        { code: ErrorCode.Unavailable, message: 'no worker is serving greet', details: { a: 1 } },
        { retryable: true, attempts: 7, exhausted: true },
      ),
    ).toEqual({
      code: 'unavailable',
      message: 'no worker is serving greet',
      details: { a: 1, retryable: true, attempts: 7, exhausted: true },
    });
    expect(
      settledError({ code: ErrorCode.Forbidden, message: 'no' }, { retryable: false }),
    ).toEqual({ code: 'forbidden', message: 'no', details: { retryable: false } });
  });
});
