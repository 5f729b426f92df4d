import { chaosReport, type ChaosFacts, type KillRecord } from './chaos-report';

const kill = (target: KillRecord['target'], inFlight: string[] = [], at = 0): KillRecord => ({
  target,
  at,
  inFlight,
  timeToRecoverMs: 1000,
  timeToReadyMs: 800,
  failedProbes: 0,
});

/** A run where d1..d3 were submitted, settled once each and ran once each. */
function facts(overrides: Partial<ChaosFacts> = {}): ChaosFacts {
  const ids = ['d1', 'd2', 'd3'];
  return {
    mode: 'short',
    broker: 'one node',
    submitted: new Map(ids.map((id) => [id, { runId: 'load-0' }])),
    submittedAt: new Map(),
    settledAt: new Map(),
    unavailableAt: [],
    probeIds: new Set(),
    settledCount: new Map(ids.map((id) => [id, 1])),
    outcomes: new Map(ids.map((id) => [id, { outcome: 'ok' }])),
    executions: new Map(ids.map((id) => [id, 1])),
    kills: [kill('tool-executor'), kill('nats-server')],
    lastEventOfLost: new Map(),
    projectionDifferences: 0,
    durationMs: 30_000,
    runFailures: [],
    startup: { cameUpAfterBroker: true, permanentFailureExits: true },
    ...overrides,
  };
}

describe('chaosReport', () => {
  it('passes a run where every call settled once, ran once and the projection equals its rebuild', () => {
    expect(chaosReport(facts())).toMatchObject({
      ok: true,
      submitted: 3,
      settled: 3,
      lost: 0,
      settledTwice: 0,
      executions: 3,
      duplicateExecutions: 0,
      unexplainedDuplicates: 0,
      projectionEqualsRebuild: true,
      failures: [],
    });
  });

  it('counts a submitted call without a settlement as lost, by the last event the journal has', () => {
    const report = chaosReport(
      facts({
        settledCount: new Map([['d1', 1]]),
        lastEventOfLost: new Map([
          ['d2', 'decided'],
          ['d3', 'decided'],
        ]),
      }),
    );
    expect(report).toMatchObject({
      ok: false,
      settled: 1,
      lost: 2,
      lostByLastEvent: { decided: 2 },
    });
    expect(report.failures).toContain('2 submitted dispatches never settled');
  });

  it('fails on a dispatch settled twice', () => {
    const report = chaosReport(
      facts({
        settledCount: new Map([
          ['d1', 2],
          ['d2', 1],
          ['d3', 1],
        ]),
      }),
    );
    expect(report).toMatchObject({ ok: false, settledTwice: 1 });
  });

  it('accepts one repeat per executor or broker kill a call was in flight at, and reports them per kill', () => {
    const report = chaosReport(
      facts({
        executions: new Map([
          ['d1', 3],
          ['d2', 2],
          ['d3', 1],
        ]),
        kills: [
          kill('tool-executor', ['d1', 'd2']),
          kill('journal', ['d3']),
          kill('nats-server', ['d1']),
        ],
      }),
    );
    expect(report).toMatchObject({ ok: true, duplicateExecutions: 3, unexplainedDuplicates: 0 });
    expect(report.kills.map((k) => [k.target, k.inFlight, k.duplicateExecutions])).toEqual([
      ['tool-executor', 2, 3],
      ['journal', 1, 0],
      ['nats-server', 1, 2],
    ]);
  });

  it('fails on a repeat no crash accounts for: not in flight, or in flight only at another kill', () => {
    const report = chaosReport(
      facts({
        executions: new Map([
          ['d1', 2],
          ['d2', 2],
          ['d3', 3],
        ]),
        kills: [kill('gateway', ['d1']), kill('tool-executor', ['d3'])],
      }),
    );
    // d1: in flight at a gateway kill only; d2: in flight nowhere; d3: one repeat too many.
    expect(report).toMatchObject({ ok: false, duplicateExecutions: 4, unexplainedDuplicates: 3 });
  });

  it('fails when the projection differs from its rebuild, or was not compared', () => {
    expect(chaosReport(facts({ projectionDifferences: 2 }))).toMatchObject({
      ok: false,
      projectionEqualsRebuild: false,
      failures: ['the projection differs from a rebuild in 2 rows'],
    });
    expect(chaosReport(facts({ projectionDifferences: null })).failures).toEqual([
      'the projection was not compared with a rebuild',
    ]);
  });

  it('fails on a kill nothing recovered from, a start-up goal missed, or a run that never submitted', () => {
    const report = chaosReport(
      facts({
        submitted: new Map(),
        kills: [{ ...kill('journal'), timeToRecoverMs: null }],
        startup: { cameUpAfterBroker: false, permanentFailureExits: false },
      }),
    );
    expect(report.failures).toEqual([
      'no dispatch was submitted',
      'no recovery after killing journal',
      'the services did not all come up by themselves after a late broker',
      'a service with a bad setting did not exit at once saying so',
    ]);
  });

  it('counts outcomes and error codes of the load, not of the probes', () => {
    const report = chaosReport(
      facts({
        submitted: new Map(['d1', 'd2', 'd3', 'p1'].map((id) => [id, { runId: 'r' }])),
        settledCount: new Map(['d1', 'd2', 'd3', 'p1'].map((id) => [id, 1])),
        probeIds: new Set(['p1']),
        outcomes: new Map([
          ['d1', { outcome: 'ok' }],
          ['d2', { outcome: 'error', errorCode: 'timeout' }],
          ['d3', { outcome: 'error', errorCode: 'timeout' }],
          ['p1', { outcome: 'error', errorCode: 'unavailable' }],
        ]),
      }),
    );
    expect(report).toMatchObject({
      submitted: 4,
      settled: 4,
      outcomes: { ok: 1, error: 2 },
      errorCodes: { timeout: 2 },
    });
  });

  it('measures each leader change: p99 of submit → settled around it, the longest stall after it, and its 503s', () => {
    // Leader change at t=10,000. Calls sent at 9,500 (window), 10,500 (window) and 20,000 (not).
    const report = chaosReport(
      facts({
        broker: 'cluster',
        startup: null,
        submittedAt: new Map([
          ['d1', 9_500],
          ['d2', 10_500],
          ['d3', 20_000],
        ]),
        settledAt: new Map([
          ['d1', 10_200],
          ['d2', 15_500],
          ['d3', 20_100],
        ]),
        unavailableAt: [9_000, 10_100, 10_200, 30_000],
        kills: [
          kill('tool-executor', [], 1000),
          kill('stream-leader', [], 10_000),
          kill('gateway', [], 25_000),
          kill('stream-leader-stepdown', [], 30_500),
          kill('journal', [], 30_600),
        ],
      }),
    );
    expect(report).toMatchObject({ ok: true, broker: 'cluster', unavailable: 4 });
    expect(report.kills).toEqual([
      expect.not.objectContaining({ settleP99Ms: expect.anything() }),
      // Latencies 700 and 5,000: p99 is 5,000. Settlements after the change: 10,200, 15,500 —
      // the longest stall is 15,500 − 10,200.
      expect.objectContaining({
        target: 'stream-leader',
        settleP99Ms: 5000,
        longestGapMs: 5300,
        unavailable: 2,
      }),
      expect.objectContaining({ target: 'gateway', unavailable: 1 }),
      // Cut at the next fault, 100 ms later: no call sent and none settled in its window.
      expect.objectContaining({
        target: 'stream-leader-stepdown',
        settleP99Ms: null,
        longestGapMs: null,
        unavailable: 0,
      }),
      expect.objectContaining({ target: 'journal', unavailable: 0 }),
    ]);
    expect(report.kills[0]!.unavailable).toBe(1);
  });

  it('checks no start-up goal on a cluster run (the single-node run does)', () => {
    expect(chaosReport(facts({ broker: 'cluster', startup: null })).failures).toEqual([]);
  });
});
