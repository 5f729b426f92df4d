/**
 * The chaos run's verdict, computed from what it observed: pure, so the rules that decide whether a
 * run passed are tested on their own (chaos-report.spec.ts).
 */

/**
 * What a kill hit: one of the five services, or the broker — on one node, the nats-server; on a
 * cluster (`--cluster`), the journal stream's leader node (`stream-leader`), the meta leader's node
 * (`meta-leader`), or no kill but a graceful leader change (`stream-leader-stepdown`).
 */
export type KillTarget =
  | 'gateway'
  | 'permission-evaluator'
  | 'tool-executor'
  | 'journal'
  | 'worktree'
  | 'nats-server'
  | 'stream-leader'
  | 'stream-leader-stepdown'
  | 'meta-leader';

/** The targets that change who leads the cluster: their settlement gap is measured. */
export const LEADER_CHANGES: readonly KillTarget[] = [
  'stream-leader',
  'stream-leader-stepdown',
  'meta-leader',
];

/**
 * Kills after which a call may run again: the executor's (a crash between the tool's side effect and
 * its `settled` — at least once across crashes) and a broker node's (the executor's reply, `settled`
 * or ack may be lost with it, and the decision is redelivered).
 */
const KILLS_THAT_MAY_REPEAT_A_CALL: readonly KillTarget[] = [
  'tool-executor',
  'nats-server',
  'stream-leader',
  'meta-leader',
];

/** Load calls submitted from this long before a leader change… */
const GAP_WINDOW_BEFORE_MS = 1000;
/** …to this long after it make up its settlement gap. */
const GAP_WINDOW_AFTER_MS = 5000;
/** The stall after a leader change is looked for this long. */
const STALL_WINDOW_MS = 15_000;

/** One kill -9 and what it found and left behind. */
export interface KillRecord {
  target: KillTarget;
  /** When it was killed (or asked to step down), epoch ms. */
  at: number;
  /** For a cluster node: which leaderships the node held (`stream`, `meta`). */
  led?: readonly string[];
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
  /** One nats-server with R1 streams, or a 3-node cluster with R3 streams. */
  broker: 'one node' | 'cluster';
  /** When each load call was first sent, and when it was seen settled (epoch ms). */
  submittedAt: ReadonlyMap<string, number>;
  settledAt: ReadonlyMap<string, number>;
  /** When the gateway answered a load call 503, one entry per answer. */
  unavailableAt: readonly number[];
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
  /** Not checked on a cluster (the single-node run checks it). */
  startup: {
    /** Started before their broker, every service retried (saying so) and came up once it did. */
    cameUpAfterBroker: boolean;
    /** A service with a bad setting exited at once with status 1, naming it, without retrying. */
    permanentFailureExits: boolean;
  } | null;
}

/** The JSON line `npm run chaos` prints. */
export interface ChaosReport {
  mode: 'short' | 'full';
  broker: ChaosFacts['broker'];
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
  /** Load submissions the gateway answered 503 (the client retried them). Goal 0. */
  unavailable: number;
  kills: {
    target: KillTarget;
    led?: readonly string[];
    /** 503s answered from this kill until the next. */
    unavailable: number;
    /**
     * Leader changes only: p99 of submit → settled of the load calls submitted from 1 s before
     * to 5 s after the change, and the longest time without any settlement in the 15 s after it
     * (both windows cut at the next fault).
     */
    settleP99Ms?: number | null;
    longestGapMs?: number | null;
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

/** The nearest-rank p99 of `values`; null when there are none. */
function p99(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length * 0.99) - 1]!;
}

/** How a leader change at `at` delayed the load: see {@link ChaosReport}'s `kills`. */
function settlementGap(
  facts: ChaosFacts,
  at: number,
  /** When the next fault struck: the windows end there, so one fault's cost is not the next's. */
  nextAt: number,
): { settleP99Ms: number | null; longestGapMs: number | null } {
  const latencies: number[] = [];
  for (const [id, sentAt] of facts.submittedAt) {
    if (sentAt < at - GAP_WINDOW_BEFORE_MS || sentAt > Math.min(at + GAP_WINDOW_AFTER_MS, nextAt))
      continue;
    const settledAt = facts.settledAt.get(id);
    if (settledAt !== undefined) latencies.push(settledAt - sentAt);
  }
  const settlements = [...facts.settledAt.values()]
    .filter((t) => t >= at && t <= Math.min(at + STALL_WINDOW_MS, nextAt))
    .sort((a, b) => a - b);
  if (settlements.length === 0) return { settleP99Ms: p99(latencies), longestGapMs: null };
  let longest = settlements[0]! - at;
  for (let i = 1; i < settlements.length; i++)
    longest = Math.max(longest, settlements[i]! - settlements[i - 1]!);
  return { settleP99Ms: p99(latencies), longestGapMs: longest };
}

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

  const kills = facts.kills.map((kill, i) => ({
    target: kill.target,
    ...(kill.led ? { led: kill.led } : {}),
    unavailable: facts.unavailableAt.filter(
      (t) => t >= kill.at && t < (facts.kills[i + 1]?.at ?? Infinity),
    ).length,
    ...(LEADER_CHANGES.includes(kill.target)
      ? settlementGap(facts, kill.at, facts.kills[i + 1]?.at ?? Infinity)
      : {}),
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
  if (facts.startup && !facts.startup.cameUpAfterBroker)
    failures.push('the services did not all come up by themselves after a late broker');
  if (facts.startup && !facts.startup.permanentFailureExits)
    failures.push('a service with a bad setting did not exit at once saying so');

  return {
    mode: facts.mode,
    broker: facts.broker,
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
    unavailable: facts.unavailableAt.length,
    kills,
    startup: facts.startup,
    projectionEqualsRebuild,
    projectionDifferences: facts.projectionDifferences,
    durationMs: facts.durationMs,
    failures,
  };
}
