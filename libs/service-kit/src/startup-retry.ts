import { classifyStartupFailure, describeFailure } from './startup-failure';

/** How long to wait between start-up attempts. */
export interface StartupBackoff {
  /** Before the second attempt (default 250 ms). */
  initialMs: number;
  /** Growth per attempt (default 2). */
  factor: number;
  /** The longest wait (default 10 s): a broker that comes back is noticed within it. */
  maxMs: number;
}

export const DEFAULT_STARTUP_BACKOFF: StartupBackoff = { initialMs: 250, factor: 2, maxMs: 10_000 };

export interface StartupRetryOptions {
  /** The service's name, first on every log line. */
  name: string;
  /** Where the line about each failed attempt goes (default: stderr). */
  log?: (line: string) => void;
  backoff?: Partial<StartupBackoff>;
  /** Jitter source in [0, 1) (default Math.random). */
  random?: () => number;
  /** Ends the retrying: the wait is cut short and the last failure is thrown (a signal at start-up). */
  signal?: AbortSignal;
}

/**
 * The wait after failed attempt `attempt` (1-based): exponential up to the ceiling, then ±20%
 * jitter so the replicas of a service that all lost the same broker do not retry in step.
 */
export function startupRetryDelayMs(
  attempt: number,
  backoff: StartupBackoff = DEFAULT_STARTUP_BACKOFF,
  random: () => number = Math.random,
): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** (attempt - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * Runs `start` until it succeeds. A transient failure (the broker or the database not answering,
 * a JetStream API timeout) is logged — what failed, which attempt, when the next one is — and
 * retried with backoff; a permanent one (bad configuration, credentials, permissions) is thrown at
 * once. `start` must leave nothing open when it throws, so each attempt starts clean.
 */
export async function startWithRetry<T>(
  start: () => Promise<T>,
  options: StartupRetryOptions,
): Promise<T> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const backoff = { ...DEFAULT_STARTUP_BACKOFF, ...options.backoff };
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (classifyStartupFailure(err) === 'permanent' || options.signal?.aborted) throw err;
      const delayMs = startupRetryDelayMs(attempt, backoff, options.random);
      log(
        `${options.name}: start-up attempt ${attempt} failed: ${describeFailure(err)}; ` +
          `next attempt in ${(delayMs / 1000).toFixed(1)} s`,
      );
      if (!(await pause(delayMs, options.signal))) throw err;
    }
  }
}

/** Waits `ms`; resolves false at once if the signal fires first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
