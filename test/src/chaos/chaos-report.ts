/**
 * The chaos run's verdict, computed from what it observed: pure, so the rules that decide whether a
 * run passed are tested on their own (chaos-report.spec.ts).
 */

/** What a kill hit: one of the five services, or the broker. */
export type KillTarget =
  'gateway' | 'permission-evaluator' | 'tool-executor' | 'journal' | 'worktree' | 'nats-server';

/**
 * Kills after which a call may run again: the executor's (a crash between the tool's side effect and
 * its `settled` — at least once across crashes) and the broker's (the executor's reply, `settled`
 * or ack may be lost with it, and the decision is redelivered).
 */
const KILLS_THAT_MAY_REPEAT_A_CALL: readonly KillTarget[] = ['tool-executor', 'nats-server'];

/** One kill -9 and what it found and left behind. */
export interface KillRecord {
  target: KillTarget;
  /** Dispatches that had reached the tool and not settled when the target died. */
  inFlight: readonly string[];
  /** From the kill until a call submitted right after it settled (the target restarted meanwhile). */
  timeToRecoverMs: number | null;
  /** From the kill until the target answered /readyz again. */
  timeToReadyMs: number | null;
  /** Calls submitted after the kill that settled as an error before one settled `ok`. */
  failedProbes: number;
}

/** Everything the run observed; the report is a function of this. */
export interface ChaosFacts {
  mode: 'short' | 'full';
  /** Every dispatch the gateway accepted, with its run (the load's and the probes'). */
  submitted: ReadonlyMap<string, { runId: string }>;
  /** Which of them were probes (recovery checks), not load. */
  probeIds: ReadonlySet<string>;
  /** `settled` messages per dispatch id, counted in the journal stream at the end. */
  settledCount: ReadonlyMap<string, number>;
  /** Outcome (and error code) of each settled dispatch. */
  outcomes: ReadonlyMap<string, { outcome: string; errorCode?: string }>;
  /** Executions per dispatch id, counted by the remote tool worker. */
  executions: ReadonlyMap<string, number>;
  kills: readonly KillRecord[];
  /** For each submitted dispatch that never settled: the last event the journal has of it. */
  lastEventOfLost: ReadonlyMap<string, string>;
  /** Rows that differ between the live projection and one rebuilt from the stream; null if not compared. */
  projectionDifferences: number | null;
  durationMs: number;
  /** Failures of the run itself (a service that never came back, a timeout). */
  runFailures: readonly string[];
  startup: {
    /** Started before their broker, every service retried (saying so) and came up once it did. */
    cameUpAfterBroker: boolean;
    /** A service with a bad setting exited at once with status 1, naming it, without retrying. */
    permanentFailureExits: boolean;
  };
}

/** The JSON line `npm run chaos` prints. */
export interface ChaosReport {
  mode: 'short' | 'full';
  ok: boolean;
  submitted: number;
  settled: number;
  /** Submitted and never settled. Goal 0. */
  lost: number;
  /** Dispatches with more than one `settled` in the journal. Goal 0. */
  settledTwice: number;
  /** Lost dispatches by the last event the journal has of them (where each one is stuck). */
  lostByLastEvent: Record<string, number>;
  /** Settled load dispatches (not probes) by outcome, and their errors by code. */
  outcomes: Record<string, number>;
  errorCodes: Record<string, number>;
  /** Tool executions the worker counted, and those beyond the first per dispatch. */
  executions: number;
  duplicateExecutions: number;
  /** Duplicate executions no executor or broker kill accounts for. Goal 0. */
  unexplainedDuplicates: number;
  kills: {
    target: KillTarget;
    inFlight: number;
    /** Executions beyond the first of the dispatches in flight at this kill. */
    duplicateExecutions: number;
    timeToRecoverMs: number | null;
    timeToReadyMs: number | null;
    failedProbes: number;
  }[];
  /** Start-up: retried until the broker came (goal true); a bad setting exits at once (goal true). */
  startup: ChaosFacts['startup'];
  /** The live projection equals one rebuilt from the stream, row by row. Goal true. */
  projectionEqualsRebuild: boolean;
  projectionDifferences: number | null;
  durationMs: number;
  /** Why `ok` is false; empty when every goal held. */
  failures: string[];
}

const count = (into: Record<string, number>, key: string) => {
  into[key] = (into[key] ?? 0) + 1;
};

/** Applies the goals to what a run observed. */
export function chaosReport(facts: ChaosFacts): ChaosReport {
  let settled = 0;
  let settledTwice = 0;
  const lostByLastEvent: Record<string, number> = {};
  for (const id of facts.submitted.keys()) {
    const n = facts.settledCount.get(id) ?? 0;
    if (n > 0) settled++;
    else count(lostByLastEvent, facts.lastEventOfLost.get(id) ?? 'none');
  }
  for (const n of facts.settledCount.values()) if (n > 1) settledTwice++;

  const outcomes: Record<string, number> = {};
  const errorCodes: Record<string, number> = {};
  for (const [id, { outcome, errorCode }] of facts.outcomes) {
    if (facts.probeIds.has(id)) continue;
    count(outcomes, outcome);
    if (errorCode) count(errorCodes, errorCode);
  }

  // How many repeats each dispatch is allowed: one per executor or broker kill it was in flight at.
  const allowed = new Map<string, number>();
  for (const kill of facts.kills) {
    if (!KILLS_THAT_MAY_REPEAT_A_CALL.includes(kill.target)) continue;
    for (const id of kill.inFlight) allowed.set(id, (allowed.get(id) ?? 0) + 1);
  }
  let executions = 0;
  let duplicateExecutions = 0;
  let unexplainedDuplicates = 0;
  for (const [id, n] of facts.executions) {
    executions += n;
    const repeats = Math.max(0, n - 1);
    duplicateExecutions += repeats;
    unexplainedDuplicates += Math.max(0, repeats - (allowed.get(id) ?? 0));
  }

  const kills = facts.kills.map((kill) => ({
    target: kill.target,
    inFlight: kill.inFlight.length,
    duplicateExecutions: kill.inFlight.reduce(
      (sum, id) => sum + Math.max(0, (facts.executions.get(id) ?? 0) - 1),
      0,
    ),
    timeToRecoverMs: kill.timeToRecoverMs,
    timeToReadyMs: kill.timeToReadyMs,
    failedProbes: kill.failedProbes,
  }));

  const lost = facts.submitted.size - settled;
  const projectionEqualsRebuild = facts.projectionDifferences === 0;
  const failures = [...facts.runFailures];
  if (facts.submitted.size === 0) failures.push('no dispatch was submitted');
  if (lost > 0) failures.push(`${lost} submitted dispatches never settled`);
  if (settledTwice > 0) failures.push(`${settledTwice} dispatches settled more than once`);
  if (unexplainedDuplicates > 0)
    failures.push(`${unexplainedDuplicates} executions repeated a call no crash accounts for`);
  if (!projectionEqualsRebuild)
    failures.push(
      facts.projectionDifferences === null
        ? 'the projection was not compared with a rebuild'
        : `the projection differs from a rebuild in ${facts.projectionDifferences} rows`,
    );
  for (const kill of kills) {
    if (kill.timeToRecoverMs === null) failures.push(`no recovery after killing ${kill.target}`);
  }
  if (!facts.startup.cameUpAfterBroker)
    failures.push('the services did not all come up by themselves after a late broker');
  if (!facts.startup.permanentFailureExits)
    failures.push('a service with a bad setting did not exit at once saying so');

  return {
    mode: facts.mode,
    ok: failures.length === 0,
    submitted: facts.submitted.size,
    settled,
    lost,
    settledTwice,
    lostByLastEvent,
    outcomes,
    errorCodes,
    executions,
    duplicateExecutions,
    unexplainedDuplicates,
    kills,
    startup: facts.startup,
    projectionEqualsRebuild,
    projectionDifferences: facts.projectionDifferences,
    durationMs: facts.durationMs,
    failures,
  };
}
