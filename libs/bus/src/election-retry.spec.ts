import { JetStreamApiError } from '@nats-io/jetstream';
import { attemptFailure, retryThroughElection } from './election-retry';

const named = (name: string) => Object.assign(new Error(name), { name });

describe('retryThroughElection', () => {
  it('classifies what a failed attempt says about its message', () => {
    expect(attemptFailure(named('NoRespondersError'))).toBe('not-stored');
    expect(attemptFailure(named('ConnectionError'))).toBe('not-stored');
    expect(attemptFailure(named('TimeoutError'))).toBe('unknown');
    expect(attemptFailure(named('ClosedConnectionError'))).toBe('final');
    expect(
      attemptFailure(new JetStreamApiError({ code: 503, err_code: 10008, description: 'x' })),
    ).toBe('not-stored');
    expect(
      attemptFailure(new JetStreamApiError({ code: 500, err_code: 10009, description: 'x' })),
    ).toBe('unknown');
    expect(
      attemptFailure(new JetStreamApiError({ code: 400, err_code: 10071, description: 'x' })),
    ).toBe('final');
    expect(attemptFailure('nope')).toBe('final');
  });

  it('tries again through no responders and lost answers, and says an earlier outcome was unknown', async () => {
    const failures = [named('NoRespondersError'), named('TimeoutError')];
    const timeouts: number[] = [];
    const result = await retryThroughElection(
      async (timeoutMs) => {
        timeouts.push(timeoutMs);
        const next = failures.shift();
        if (next) throw next;
        return 'acked';
      },
      { attemptTimeoutMs: 100, budgetMs: 5000 },
    );
    expect(result).toEqual({ value: 'acked', earlierUnknown: true });
    expect(timeouts).toEqual([100, 100, 100]);
  });

  it('throws a final failure at once, and an unknown one at once when a resend is not harmless', async () => {
    let calls = 0;
    const refusal = new JetStreamApiError({ code: 400, err_code: 10071, description: 'x' });
    await expect(
      retryThroughElection(async () => {
        calls++;
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    const lost = named('TimeoutError');
    await expect(
      retryThroughElection(
        async () => {
          calls++;
          throw lost;
        },
        { resendUnknown: false },
      ),
    ).rejects.toBe(lost);
    expect(calls).toBe(2);
  });

  it('sends again after a pause a publish the server failed mid-way (5xx), only when a copy is harmless', async () => {
    const failed = () => new JetStreamApiError({ code: 500, err_code: 10009, description: 'x' });
    let calls = 0;
    const started = Date.now();
    const result = await retryThroughElection(async () => {
      if (calls++ === 0) throw failed();
      return 'acked';
    });
    expect(result).toEqual({ value: 'acked', earlierUnknown: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    const once = failed();
    await expect(
      retryThroughElection(
        async () => {
          throw once;
        },
        { resendUnknown: false },
      ),
    ).rejects.toBe(once);
  });

  it('gives up with the last failure when the budget is spent', async () => {
    let clock = 0;
    let calls = 0;
    const err = await retryThroughElection(
      async (timeoutMs) => {
        calls++;
        clock += timeoutMs;
        throw named('TimeoutError');
      },
      { attemptTimeoutMs: 1000, budgetMs: 2500, now: () => clock },
    ).catch((e: unknown) => e as Error);
    expect((err as Error).name).toBe('TimeoutError');
    // 1000 + 1000 + the 500 left.
    expect(calls).toBe(3);
  });
});
