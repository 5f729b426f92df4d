import { recordedDispatch } from './dispatch-submitter';

describe('recordedDispatch: what a replay past the stream retention answers from the projection', () => {
  it('answers a settled dispatch with its outcome, result and error as recorded', () => {
    expect(
      recordedDispatch({ status: 'settled', outcome: 'ok', result: { n: 1 }, error: null }),
    ).toEqual({
      state: 'settled',
      settled: { outcome: 'ok', result: { n: 1 } },
    });
    const error = { code: 'internal' as const, message: 'boom' };
    expect(recordedDispatch({ status: 'settled', outcome: 'error', result: null, error })).toEqual({
      state: 'settled',
      settled: { outcome: 'error', error },
    });
  });

  it('names the furthest stage of one not settled as a submission names it', () => {
    const state = (status: string) => recordedDispatch({ status, outcome: null }).state;
    expect(['requested', 'decided', 'suspended', 'resolved', 'started'].map(state)).toEqual([
      'requested',
      'decided',
      'suspended',
      'decided',
      'running',
    ]);
  });
});
