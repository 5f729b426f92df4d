import { errorCapOfRule, errorCapRule } from './index';

describe('the error-cap rule of a decision', () => {
  it('reads back the facts it was written with, and nothing from any other rule', () => {
    const cap = { failures: 5, consecutive: 5 };
    expect(errorCapOfRule(errorCapRule(cap))).toEqual(cap);
    // As it comes out of the journal: plain JSON.
    expect(errorCapOfRule(JSON.parse(JSON.stringify(errorCapRule(cap))))).toEqual(cap);
    for (const other of [
      undefined,
      null,
      'error-cap',
      { source: 'policy', name: 'no-shell' },
      // Facts without the source, or the source without facts: not the evaluator's error cap.
      { errorCap: cap },
      { source: 'error-cap', kind: 'error-cap' },
      { source: 'error-cap', errorCap: { failures: '5', consecutive: 5 } },
    ])
      expect(errorCapOfRule(other)).toBeNull();
  });
});
