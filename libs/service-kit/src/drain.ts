import { z } from 'zod';
import { ConfigError, parseJournalSubject } from '@toolgate/contracts';
import type { InFlightMessage } from '@toolgate/bus';

/** What a stop drains: the service, and what its handlers are working on meanwhile. */
export interface Drainable {
  stop(): Promise<void>;
  inFlight?(): InFlightMessage[];
  /**
   * Called when the drain cap is reached, while `stop` still waits: stops the work still running
   * (the tool-executor kills its calls' process trees) and hands its messages back for redelivery
   * without settling them. Resolves once nothing of that work runs any more.
   */
  abandon?(): Promise<void>;
}

const DrainEnv = z.object({
  /**
   * The longest a graceful stop waits for in-flight work (a remote call whose worker is gone waits
   * for its deadline). Past it what still runs is stopped (the tool-executor kills its calls'
   * process trees, for at most ABANDON_WAIT_MS more), the unfinished messages are handed back for
   * redelivery to another replica, and the process exits. Keep it, plus those 10 s, below the
   * orchestrator's grace period.
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
    // <prefix>.journal[.<partition>].<tenant>.<runId>.<key>.<event>
    const parts = parseJournalSubject(m.subject);
    const age = Math.max(0, Math.round((nowMs - m.sinceMs) / 1000));
    return parts
      ? `${parts.type} of ${parts.key} (run ${parts.runId}, tenant ${parts.tenant}) for ${age} s`
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
 * The longest a capped drain waits for `abandon` to stop what still runs and for the stop to end
 * after it (a Kubernetes Job's delete is an API call; a process tree's kill takes milliseconds).
 */
const ABANDON_WAIT_MS = 10_000;

/**
 * Stops `service`, saying what it waits for at the start and every few seconds, and gives up after
 * `capMs`: `capped` means in-flight work was abandoned (its messages are redelivered elsewhere).
 * At the cap the service's `abandon` stops what still runs — before its messages go back, so a
 * redelivery never overlaps it — and the stop is given up to {@link ABANDON_WAIT_MS} to end.
 */
export async function drainWithin(
  service: Drainable,
  { capMs, reportEveryMs = 5_000, log, now = Date.now }: DrainOptions,
): Promise<'drained' | 'capped'> {
  const inFlight = () => describeInFlight(service.inFlight?.() ?? [], now());
  log(`draining (at most ${seconds(capMs)}): ${inFlight()}`);
  let cap: NodeJS.Timeout | undefined;
  let abandonWait: NodeJS.Timeout | undefined;
  const report = setInterval(() => log(`still draining: ${inFlight()}`), reportEveryMs);
  const stopped = service.stop();
  try {
    const ending = await Promise.race([
      stopped.then(() => 'drained' as const),
      new Promise<'capped'>((resolve) => {
        cap = setTimeout(() => resolve('capped'), capMs);
      }),
    ]);
    if (ending === 'drained') return ending;
    if (!service.abandon) {
      log(
        `drain cap of ${seconds(capMs)} reached with ${inFlight()}; exiting — ` +
          'their messages are redelivered to another replica after their ack wait',
      );
      return ending;
    }
    log(
      `drain cap of ${seconds(capMs)} reached with ${inFlight()}; stopping what still runs — ` +
        'their messages are handed back and redelivered to another replica',
    );
    const abandoned = await Promise.race([
      service
        .abandon()
        .then(() => stopped)
        .then(
          () => true,
          () => true,
        ),
      new Promise<false>((resolve) => {
        abandonWait = setTimeout(() => resolve(false), ABANDON_WAIT_MS);
      }),
    ]);
    if (!abandoned) log(`the abandoned work did not stop within ${seconds(ABANDON_WAIT_MS)}`);
    return ending;
  } finally {
    clearInterval(report);
    clearTimeout(cap);
    clearTimeout(abandonWait);
    // A stop that fails after the cap is the abandoned work's (already reported).
    stopped.catch(() => undefined);
  }
}
