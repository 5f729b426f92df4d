import { ErrorCapReplay } from './error-cap-replay';

describe('replaying the error cap under a candidate policy', () => {
  it('refuses a run whose candidate denials reach the cap, and a success ends the streak', () => {
    const replay = new ErrorCapReplay(3);
    replay.decided('r', 'd1', 'allow', 'allow');
    replay.settled('d1', 'ok');
    for (const id of ['d2', 'd3']) replay.decided('r', id, 'allow', 'deny');
    expect(replay.standing('r')).toEqual({ mark: null, failures: 2 });
    replay.decided('r', 'd4', 'allow', 'allow');
    replay.settled('d4', 'error');
    expect(replay.standing('r')).toEqual({ mark: 'refused', failures: 3 });
    // Another run is not affected.
    expect(replay.standing('other')).toEqual({ mark: null, failures: 0 });
    const reset = new ErrorCapReplay(3);
    reset.decided('r', 'd1', 'allow', 'deny');
    reset.decided('r', 'd2', 'allow', 'deny');
    reset.decided('r', 'd3', 'allow', 'allow');
    reset.settled('d3', 'ok');
    expect(reset.standing('r')).toEqual({ mark: null, failures: 0 });
  });

  it('marks a streak the record cannot tell as possible, never as certain', () => {
    const replay = new ErrorCapReplay(2);
    // Denied then, allowed now: it never ran, so its outcome is unknown.
    replay.decided('r', 'd1', 'deny', 'allow');
    replay.settled('d1', 'denied');
    replay.decided('r', 'd2', 'allow', 'deny');
    expect(replay.standing('r')).toEqual({ mark: 'possible', failures: 1 });
    // A person would decide it now: unknown too.
    const ask = new ErrorCapReplay(1);
    ask.decided('r', 'd1', 'allow', 'ask');
    ask.settled('d1', 'error');
    expect(ask.standing('r').mark).toBe('possible');
    // An ask now allowed that ran then: its outcome is known.
    const ran = new ErrorCapReplay(1);
    ran.decided('r', 'd1', 'ask', 'allow');
    ran.settled('d1', 'error');
    expect(ran.standing('r').mark).toBe('refused');
  });

  it('never refuses without a cap', () => {
    const replay = new ErrorCapReplay(null);
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) replay.decided('r', id, 'allow', 'deny');
    expect(replay.standing('r').mark).toBeNull();
  });
});
