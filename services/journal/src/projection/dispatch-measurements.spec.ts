import { dispatchFixture } from '../../test/fixtures/journal-events.fixture';
import { evolveDispatch, type DispatchEvent, type DispatchState } from './dispatch-fold';
import { measureDispatch, type DispatchMeasurement } from './dispatch-measurements';

/**
 * Given a dispatch's stored row, when a run of events folds into it, then these are measured —
 * the way the projection calls it, once per row per transaction.
 */
function foldRuns(runs: DispatchEvent[][]): DispatchMeasurement[][] {
  let state: DispatchState | undefined;
  return runs.map((events) => {
    const before = state;
    for (const event of events) state = evolveDispatch(state, event);
    return measureDispatch(before, state!);
  });
}

const d = dispatchFixture({ dispatchId: 'd1', toolName: 'read_file' });

describe('measureDispatch', () => {
  it('measures an allowed call once per stage, from the events’ times', () => {
    const [requested, decided, started, settled] = foldRuns([
      [d.requested(0)],
      [d.decided(0.5, 'allow')],
      [d.started(0.75)],
      [d.settled(2.75, 'ok')],
    ]);
    expect(requested).toEqual([]);
    expect(decided).toEqual([
      {
        kind: 'verdict',
        tenant: 'acme',
        tool: 'read_file',
        verdict: 'allow',
        decidedBy: 'default',
        ruleKind: 'none',
      },
      { kind: 'hop', hop: 'requested-decided', seconds: 0.5 },
    ]);
    expect(started).toEqual([{ kind: 'hop', hop: 'decided-started', seconds: 0.25 }]);
    expect(settled).toEqual([
      { kind: 'hop', hop: 'started-settled', seconds: 2 },
      { kind: 'settled', tenant: 'acme', tool: 'read_file', outcome: 'ok', code: 'ok' },
      { kind: 'latency', path: 'direct', outcome: 'ok', seconds: 2.75 },
    ]);
  });

  it('measures the same once when the whole dispatch folds in one run', () => {
    const [all] = foldRuns([
      [d.requested(0), d.decided(0.5, 'allow'), d.started(0.75), d.settled(2.75, 'error')],
    ]);
    expect(all!.map((m) => m.kind).sort()).toEqual([
      'hop',
      'hop',
      'hop',
      'latency',
      'settled',
      'verdict',
    ]);
    expect(all).toContainEqual({
      kind: 'settled',
      tenant: 'acme',
      tool: 'read_file',
      outcome: 'error',
      code: 'tool-failed',
    });
  });

  it('measures a parked call’s wait, its queue time after the resolution, and its latency as the approval path', () => {
    const runs = foldRuns([
      [d.requested(0), d.decided(1, 'ask'), d.suspended(1, 100)],
      [d.resolved(61, 'allow', 'bob', 'human')],
      [d.started(61.5)],
      [d.settled(62, 'ok')],
    ]);
    expect(runs[0]).toEqual([
      {
        kind: 'verdict',
        tenant: 'acme',
        tool: 'read_file',
        verdict: 'ask',
        decidedBy: 'ask-rule',
        ruleKind: 'none',
      },
      { kind: 'hop', hop: 'requested-decided', seconds: 1 },
    ]);
    expect(runs[1]).toEqual([
      { kind: 'resolved', source: 'human', decision: 'allow' },
      { kind: 'approval-wait', source: 'human', seconds: 60 },
    ]);
    // Not decided-started: the wait is the approval's, not the executor's queue.
    expect(runs[2]).toEqual([{ kind: 'hop', hop: 'resolved-started', seconds: 0.5 }]);
    expect(runs[3]).toContainEqual({
      kind: 'latency',
      path: 'approval',
      outcome: 'ok',
      seconds: 62,
    });
  });

  it('counts a timed-out approval by its source and a denial by its code', () => {
    const runs = foldRuns([
      [d.requested(0), d.decided(0, 'ask'), d.suspended(0, 30)],
      [d.resolved(30, 'deny', 'system:timeout', 'timeout'), d.settled(30.5, 'denied')],
    ]);
    expect(runs[1]).toEqual([
      { kind: 'resolved', source: 'timeout', decision: 'deny' },
      { kind: 'approval-wait', source: 'timeout', seconds: 30 },
      { kind: 'settled', tenant: 'acme', tool: 'read_file', outcome: 'denied', code: 'denied' },
      { kind: 'latency', path: 'approval', outcome: 'denied', seconds: 30.5 },
    ]);
  });

  it('names the decisive rule’s kind', () => {
    const decided = { ...d.decided(1, 'deny'), rule: { source: 'engine', kind: 'protected-path' } };
    const [run] = foldRuns([[d.requested(0), decided]]);
    expect(run).toContainEqual(
      expect.objectContaining({
        kind: 'verdict',
        decidedBy: 'deny-rule',
        ruleKind: 'protected-path',
      }),
    );
  });

  it('measures a pair when its later event arrives, whichever end that is, and never twice', () => {
    const runs = foldRuns([
      [d.settled(3, 'ok')],
      [d.started(1)],
      [d.requested(0)],
      [d.decided(0.5, 'allow')],
      // A redelivered attempt's started changes nothing already measured.
      [d.started(2, 2)],
    ]);
    expect(runs[0]).toEqual([
      { kind: 'settled', tenant: 'acme', tool: 'read_file', outcome: 'ok', code: 'ok' },
    ]);
    expect(runs[1]).toEqual([{ kind: 'hop', hop: 'started-settled', seconds: 2 }]);
    expect(runs[2]).toEqual([{ kind: 'latency', path: 'direct', outcome: 'ok', seconds: 3 }]);
    expect(runs[3]).toEqual([
      expect.objectContaining({ kind: 'verdict' }),
      { kind: 'hop', hop: 'requested-decided', seconds: 0.5 },
      { kind: 'hop', hop: 'decided-started', seconds: 0.5 },
    ]);
    expect(runs[4]).toEqual([]);
  });

  it('counts a hop that clock skew makes negative as zero', () => {
    const [run] = foldRuns([[d.requested(10), d.decided(9.9, 'allow')]]);
    expect(run).toContainEqual({ kind: 'hop', hop: 'requested-decided', seconds: 0 });
  });
});
