import { at, dispatchFixture } from '../../test/fixtures/journal-events.fixture';
import { evolveDispatch, foldDispatch, type DispatchEvent } from './dispatch-fold';
import { evolveApproval, type ApprovalState } from './approval-fold';
import { runStatus } from './run-status';

const d = dispatchFixture({ dispatchId: 'd1' });

/** given(events) → then(state): the events folded from nothing. */
const given = (...events: DispatchEvent[]) => foldDispatch(events);

describe('evolveDispatch', () => {
  it('allow: requested → decided → started → settled ok', () => {
    const state = given(
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(2),
      d.settled(3, 'ok', { result: 42 }),
    );
    expect(state).toMatchObject({
      status: 'settled',
      callId: 'call-d1',
      toolName: 'read_file',
      verdict: 'allow',
      attempt: 1,
      outcome: 'ok',
      result: 42,
      requestedAt: at(0),
      decidedAt: at(1),
      startedAt: at(2),
      settledAt: at(3),
      updatedAt: at(3),
    });
  });

  it('a requested dispatch is in state requested with the caller input and submitter', () => {
    expect(given(d.requested(0))).toMatchObject({
      status: 'requested',
      input: d.input,
      submittedBy: 'alice',
      verdict: null,
      settledAt: null,
    });
  });

  it('deny: decided(deny) → settled denied carries the policy reason', () => {
    const state = given(
      d.requested(0),
      d.decided(1, 'deny', 'writes are forbidden'),
      d.settled(2, 'denied'),
    );
    expect(state).toMatchObject({
      status: 'settled',
      verdict: 'deny',
      decidedBy: 'deny-rule',
      reason: 'writes are forbidden',
      outcome: 'denied',
      attempt: 0,
      startedAt: null,
    });
  });

  it('ask parks the dispatch as suspended with its approval key and expiry', () => {
    const state = given(d.requested(0), d.decided(1, 'ask'), d.suspended(1, 3600));
    expect(state).toMatchObject({
      status: 'suspended',
      verdict: 'ask',
      approvalKey: d.approvalKey,
      expiresAt: at(3600),
      suspendedAt: at(1),
    });
  });

  it('ask → resolved(allow) → started → settled', () => {
    const state = given(
      d.requested(0),
      d.decided(1, 'ask'),
      d.suspended(1, 3600),
      d.resolved(10, 'allow'),
      d.started(11),
      d.settled(12, 'ok'),
    );
    expect(state).toMatchObject({
      status: 'settled',
      verdict: 'ask',
      decision: 'allow',
      resolvedBy: 'bob',
      resolutionSource: 'human',
      resolvedAt: at(10),
      attempt: 1,
      outcome: 'ok',
    });
  });

  it('ask → resolved(deny) is resolved until the executor settles it denied', () => {
    const parked = [
      d.requested(0),
      d.decided(1, 'ask'),
      d.suspended(1, 3600),
      d.resolved(10, 'deny'),
    ] as const;
    expect(given(...parked)).toMatchObject({ status: 'resolved', decision: 'deny', outcome: null });
    expect(given(...parked, d.settled(11, 'denied'))).toMatchObject({
      status: 'settled',
      decision: 'deny',
      outcome: 'denied',
      startedAt: null,
    });
  });

  it('a timeout resolution records its source and the system identity', () => {
    const state = given(
      d.requested(0),
      d.decided(1, 'ask'),
      d.suspended(1, 60),
      d.resolved(61, 'deny', 'system:timeout', 'timeout'),
    );
    expect(state).toMatchObject({ resolvedBy: 'system:timeout', resolutionSource: 'timeout' });
  });

  it('a redelivered execution shows the latest attempt, whatever order the attempts arrive in', () => {
    const inOrder = given(
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(2, 1),
      d.started(5, 2),
      d.settled(6, 'ok', { attempt: 2 }),
    );
    const reordered = given(
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(5, 2),
      d.settled(6, 'ok', { attempt: 2 }),
      d.started(2, 1),
    );
    expect(inOrder).toMatchObject({ attempt: 2, startedAt: at(5) });
    expect(reordered).toEqual(inOrder);
  });

  it('an event redelivered after a later one never moves the status backwards', () => {
    const state = given(
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(2),
      d.settled(3, 'ok'),
      d.decided(1, 'allow'),
    );
    expect(state?.status).toBe('settled');
  });

  it('folding the same events in any order gives the same state', () => {
    const events = [
      d.requested(0),
      d.decided(1, 'ask'),
      d.suspended(1, 3600),
      d.resolved(10, 'allow'),
      d.started(11),
      d.settled(12, 'ok'),
    ];
    const expected = foldDispatch(events);
    const permutations: DispatchEvent[][] = [
      [...events].reverse(),
      [events[2]!, events[0]!, events[5]!, events[1]!, events[4]!, events[3]!],
      [events[3]!, events[4]!, events[0]!, events[1]!, events[2]!, events[5]!],
    ];
    for (const order of permutations) expect(foldDispatch(order)).toEqual(expected);
  });

  it('does not mutate the state or the event it is given', () => {
    const before = given(d.requested(0))!;
    const event = d.decided(1, 'allow');
    const snapshot = structuredClone({ before, event });
    const after = evolveDispatch(before, event);
    expect({ before, event }).toEqual(snapshot);
    expect(after).toMatchObject({ status: 'decided', verdict: 'allow' });
  });
});

describe('evolveApproval', () => {
  const fold = (...events: Parameters<typeof evolveApproval>[1][]) =>
    events.reduce<ApprovalState | undefined>(evolveApproval, undefined);

  it('a suspension is a pending approval of the exact call', () => {
    expect(fold(d.suspended(1, 3600))).toMatchObject({
      status: 'pending',
      approvalKey: d.approvalKey,
      inputDigest: d.inputDigest,
      policyRevision: 3,
      toolName: 'read_file',
      input: d.input,
      rule: { tool: 'read_file' },
      onTimeout: 'deny',
      separationOfDuties: false,
      suspendedAt: at(1),
      expiresAt: at(3600),
      decision: null,
    });
  });

  it('a resolution closes it with who, when, why and source', () => {
    expect(fold(d.suspended(1, 3600), d.resolved(9, 'allow'))).toMatchObject({
      status: 'resolved',
      decision: 'allow',
      resolvedBy: 'bob',
      reason: 'bob said allow',
      source: 'human',
      resolvedAt: at(9),
    });
  });

  it("keeps the first resolution: a race's refused loser replayed later rewrites nobody's decision", () => {
    const timedOut = d.resolved(61, 'deny', 'system:timeout', 'timeout');
    const replayed = d.resolved(62, 'allow');
    expect(fold(d.suspended(1, 60), timedOut, replayed)).toEqual(
      fold(d.suspended(1, 60), timedOut),
    );
    expect(
      given(d.requested(0), d.decided(1, 'ask'), d.suspended(1, 60), timedOut, replayed),
    ).toMatchObject({
      decision: 'deny',
      resolvedBy: 'system:timeout',
      resolutionSource: 'timeout',
    });
  });

  it('a resolution redelivered ahead of its suspension does not reopen the approval', () => {
    expect(fold(d.resolved(9, 'deny'), d.suspended(1, 3600))).toEqual(
      fold(d.suspended(1, 3600), d.resolved(9, 'deny')),
    );
  });
});

describe('runStatus', () => {
  it.each([
    [[], 'running'],
    [['settled', 'settled'], 'settled'],
    [['suspended', 'settled', 'suspended'], 'suspended'],
    [['suspended', 'started'], 'running'],
    [['suspended', 'resolved'], 'running'],
    [['requested'], 'running'],
  ] as const)('%j → %s', (statuses, expected) => {
    expect(runStatus(statuses)).toBe(expected);
  });
});
