import { z } from 'zod';
import { ConfigError } from '@toolgate/contracts';
import type { InFlightMessage } from '@toolgate/bus';

/** What a stop drains: the service, and what its handlers are working on meanwhile. */
export interface Drainable {
  stop(): Promise<void>;
  inFlight?(): InFlightMessage[];
}

const DrainEnv = z.object({
  /**
   * The longest a graceful stop waits for in-flight work (a remote call whose worker is gone waits
   * for its deadline). Past it the process exits and the unfinished messages are redelivered to
   * another replica after their ack wait. Keep it below the orchestrator's grace period.
   */
  TOOLGATE_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
});

export interface DrainSettings {
  capMs: number;
}

/** Parses the drain settings once from the environment; a bad value is a ConfigError naming it. */
export function loadDrainSettings(env: NodeJS.ProcessEnv): DrainSettings {
  const parsed = DrainEnv.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      `invalid TOOLGATE_DRAIN_TIMEOUT_MS: ${parsed.error.issues[0]?.message ?? 'not a number'}`,
    );
  }
  return Object.freeze({ capMs: parsed.data.TOOLGATE_DRAIN_TIMEOUT_MS });
}

/** Seconds for a log line: one decimal under ten. */
const seconds = (ms: number) => `${ms < 10_000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)} s`;

/** How many in-flight messages a log line names; the rest are counted. */
const LISTED = 5;

/**
 * One line saying what a stop waits for: each in-flight message's event type, dispatch (or
 * worktree) and run — read from its journal subject, never from its body — and how long it has
 * been handled, oldest first.
 */
export function describeInFlight(messages: readonly InFlightMessage[], nowMs: number): string {
  if (!messages.length) return 'nothing in flight';
  const sorted = [...messages].sort((a, b) => a.sinceMs - b.sinceMs);
  const named = sorted.slice(0, LISTED).map((m) => {
    // <prefix>.journal.<tenant>.<runId>.<key>.<event>
    const [, , tenant, runId, key, type] = m.subject.split('.');
    const age = Math.max(0, Math.round((nowMs - m.sinceMs) / 1000));
    return type
      ? `${type} of ${key} (run ${runId}, tenant ${tenant}) for ${age} s`
      : `${m.subject} #${m.seq} for ${age} s`;
  });
  const more = sorted.length > LISTED ? ` and ${sorted.length - LISTED} more` : '';
  return `${sorted.length} in flight: ${named.join('; ')}${more}`;
}

export interface DrainOptions {
  capMs: number;
  /** How often a long drain says again what it still waits for. */
  reportEveryMs?: number;
  log(line: string): void;
  now?: () => number;
}

/**
 * Stops `service`, saying what it waits for at the start and every few seconds, and gives up after
 * `capMs`: `capped` means in-flight work was abandoned (its messages are redelivered elsewhere).
 */
export async function drainWithin(
  service: Drainable,
  { capMs, reportEveryMs = 5_000, log, now = Date.now }: DrainOptions,
): Promise<'drained' | 'capped'> {
  const inFlight = () => describeInFlight(service.inFlight?.() ?? [], now());
  log(`draining (at most ${seconds(capMs)}): ${inFlight()}`);
  let cap: NodeJS.Timeout | undefined;
  const report = setInterval(() => log(`still draining: ${inFlight()}`), reportEveryMs);
  try {
    return await Promise.race([
      service.stop().then(() => 'drained' as const),
      new Promise<'capped'>((resolve) => {
        cap = setTimeout(() => {
          log(
            `drain cap of ${seconds(capMs)} reached with ${inFlight()}; exiting — ` +
              'their messages are redelivered to another replica after their ack wait',
          );
          resolve('capped');
        }, capMs);
      }),
    ]);
  } finally {
    clearInterval(report);
    clearTimeout(cap);
  }
}
