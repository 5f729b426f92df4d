import { decideClaim, type AttemptsView, type ClaimAsk } from './claim-rule';

const T0 = Date.parse('2026-11-30T12:00:00.000Z');
const LEASE = 90_000;

const ask = (over: Partial<ClaimAsk> = {}): ClaimAsk => ({
  causationId: 'd1:decided',
  deliveryCount: 1,
  nowMs: T0,
  leaseMs: LEASE,
  ...over,
});
const claimedBy = (causationId: string | null, attempt: number, storedAtMs = T0): AttemptsView => ({
  settled: false,
  started: { seq: 42, causationId, attempt, storedAtMs },
});

describe('decideClaim: given the journal and a delivery, who runs the call', () => {
  it('never runs a settled dispatch, whoever holds its claim', () => {
    expect(decideClaim({ settled: true, started: null }, ask())).toEqual({ kind: 'settled' });
    expect(
      decideClaim({ ...claimedBy('d1:decided', 1), settled: true }, ask({ deliveryCount: 3 })),
    ).toEqual({ kind: 'settled' });
  });

  it('claims an unclaimed dispatch with an expectation of nothing recorded', () => {
    expect(decideClaim({ settled: false, started: null }, ask({ deliveryCount: 4 }))).toEqual({
      kind: 'claim',
      expectSeq: 0,
      takeover: false,
    });
  });

  it('takes over from an earlier delivery of the same decision (its holder went silent)', () => {
    expect(decideClaim(claimedBy('d1:decided', 1), ask({ deliveryCount: 2 }))).toEqual({
      kind: 'claim',
      expectSeq: 42,
      takeover: true,
    });
  });

  it('waits for a live claim of a later delivery, another decision or an unreadable record', () => {
    for (const view of [
      claimedBy('d1:decided', 2),
      claimedBy('d1:decided', 3),
      claimedBy('d1:resolved', 1),
      claimedBy(null, 0),
    ]) {
      expect(decideClaim(view, ask({ deliveryCount: 2, nowMs: T0 + 1000 }))).toEqual({
        kind: 'wait',
        untilMs: T0 + LEASE,
      });
    }
  });

  it('takes over a claim whose lease ran out, and not a moment before', () => {
    const view = claimedBy('d1:resolved', 1);
    expect(decideClaim(view, ask({ nowMs: T0 + LEASE - 1 })).kind).toBe('wait');
    expect(decideClaim(view, ask({ nowMs: T0 + LEASE }))).toEqual({
      kind: 'claim',
      expectSeq: 42,
      takeover: true,
    });
  });

  it('never takes over a claim of the same or a later delivery of its decision', () => {
    // Same count: a consumer recreated since (it counts from 1 again), or a forged record.
    expect(decideClaim(claimedBy('d1:decided', 1), ask()).kind).toBe('wait');
    expect(decideClaim(claimedBy('d1:decided', 3), ask({ deliveryCount: 2 })).kind).toBe('wait');
  });

  it('supersedes at once a record nobody who writes claims signed, without waiting out a lease', () => {
    const forged = { settled: false, started: { ...claimedBy(null, 0).started!, forged: true } };
    expect(decideClaim(forged, ask({ nowMs: T0 + 1 }))).toEqual({
      kind: 'claim',
      expectSeq: 42,
      takeover: false,
    });
  });
});
