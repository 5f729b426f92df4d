import { errors } from '@nats-io/transport-node';
import { ConfigError } from '@toolgate/contracts';
import { startupRetryDelayMs, startWithRetry } from './startup-retry';

const backoff = { initialMs: 250, factor: 2, maxMs: 10_000 };

describe('startupRetryDelayMs', () => {
  it('doubles from the first delay up to the ceiling', () => {
    const middle = () => 0.5; // no jitter
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => startupRetryDelayMs(n, backoff, middle))).toEqual([
      250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
  });

  it('jitters by at most a fifth either way', () => {
    expect(startupRetryDelayMs(3, backoff, () => 0)).toBe(800);
    expect(startupRetryDelayMs(3, backoff, () => 0.999_999)).toBe(1200);
  });
});

describe('startWithRetry', () => {
  const fast = { initialMs: 1, factor: 1, maxMs: 1 };

  it('retries transient failures, logging what failed, the attempt and the next wait, until one succeeds', async () => {
    const lines: string[] = [];
    let attempts = 0;
    const value = await startWithRetry(
      async () => {
        attempts++;
        if (attempts < 3) throw new errors.TimeoutError();
        return 'up';
      },
      { name: 'tool-executor', log: (l) => lines.push(l), backoff: fast, random: () => 0.5 },
    );
    expect(value).toBe('up');
    expect(attempts).toBe(3);
    expect(lines).toEqual([
      'tool-executor: start-up attempt 1 failed: timeout; next attempt in 0.0 s',
      'tool-executor: start-up attempt 2 failed: timeout; next attempt in 0.0 s',
    ]);
  });

  it('throws a permanent failure at once, without a retry', async () => {
    const lines: string[] = [];
    let attempts = 0;
    const bad = new ConfigError('GATEWAY_PORT must be a port');
    await expect(
      startWithRetry(
        async () => {
          attempts++;
          throw bad;
        },
        { name: 'gateway', log: (l) => lines.push(l), backoff: fast },
      ),
    ).rejects.toBe(bad);
    expect(attempts).toBe(1);
    expect(lines).toEqual([]);
  });

  it('stops retrying when its signal fires during the wait, with the last failure', async () => {
    const stop = new AbortController();
    let attempts = 0;
    const failing = startWithRetry(
      async () => {
        attempts++;
        throw new errors.ConnectionError('connection refused');
      },
      {
        name: 'journal',
        signal: stop.signal,
        // The wait has begun by the time this fires: the minute-long pause is cut short.
        log: () => setTimeout(() => stop.abort(), 20),
        backoff: { initialMs: 60_000, factor: 1, maxMs: 60_000 },
      },
    );
    await expect(failing).rejects.toThrow('connection refused');
    expect(attempts).toBe(1);
  });
});
