import { isCapped, nextStreak, type Streak } from './error-streak';

const none: Streak = { failures: 0, recent: [] };

/** Applies settlements in order, as the journal chain would. */
function given(...settlements: [string, 'ok' | 'error' | 'denied'][]): Streak {
  return settlements.reduce<Streak>((s, [id, outcome]) => nextStreak(s, id, outcome) ?? s, none);
}

describe('the error streak (pure)', () => {
  it('counts errors and denials in a row, and a success ends the streak', () => {
    expect(given(['a', 'error'], ['b', 'denied'], ['c', 'error']).failures).toBe(3);
    expect(given(['a', 'error'], ['b', 'denied'], ['c', 'ok']).failures).toBe(0);
    expect(given(['a', 'error'], ['b', 'ok'], ['c', 'error']).failures).toBe(1);
  });

  it('applies a dispatch once: a settlement redone after a crash does not count again', () => {
    const s = given(['a', 'error'], ['b', 'error']);
    expect(nextStreak(s, 'b', 'error')).toBeNull();
    expect(nextStreak(s, 'a', 'ok')).toBeNull();
  });

  it('has nothing to record for a success that ends no streak', () => {
    expect(nextStreak(none, 'a', 'ok')).toBeNull();
  });

  it('remembers the last 32 dispatches only', () => {
    const ids = Array.from({ length: 40 }, (_, i) => `d${i}`);
    const s = given(...ids.map((id): [string, 'error'] => [id, 'error']));
    expect(s.failures).toBe(40);
    expect(s.recent).toEqual(ids.slice(-32));
  });

  it('caps at the configured count; no cap never caps', () => {
    const four = given(['a', 'error'], ['b', 'error'], ['c', 'error'], ['d', 'error']);
    expect(isCapped(four, 5)).toBe(false);
    expect(
      isCapped(
        given(['a', 'error'], ['b', 'error'], ['c', 'error'], ['d', 'error'], ['e', 'denied']),
        5,
      ),
    ).toBe(true);
    expect(isCapped(four, 4)).toBe(true);
    expect(isCapped({ failures: 1000, recent: [] }, null)).toBe(false);
  });
});
