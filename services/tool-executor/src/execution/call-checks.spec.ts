import {
  approvalKey,
  inputDigest,
  journalEvent,
  type DecidedEvent,
  type RequestedEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';
import {
  checkDecided,
  checkSuspended,
  revisionExisted,
  type DecisionFacts,
  type PolicyHistory,
} from './call-checks';

const TOOL = {
  name: 'write_file',
  contractHash: 'c'.repeat(64),
  needsApproval: false,
  executor: 'inprocess' as const,
  risk: 'write' as const,
};
const WHERE = { tenant: 'acme', runId: 'run1', dispatchId: 'd1' };
const AT = '2026-03-01T10:00:00.000Z';
const REQUESTED_INPUT = { path: 'a.txt', content: 'x' };
/** A hook rewrote the input: the decision covers this one. */
const POST_HOOK_INPUT = { path: 'a.txt', content: 'x\n' };

function requested(overrides: Partial<RequestedEvent> = {}): RequestedEvent {
  return journalEvent({
    type: 'requested',
    id: 'd1:requested',
    ...WHERE,
    at: AT,
    causationId: null,
    callId: 'c1',
    tool: TOOL,
    input: REQUESTED_INPUT,
    agent: { agentType: 'coder' },
    isolation: 'none',
    profile: 'dev',
    submittedBy: 'alice',
    ...overrides,
  } as Parameters<typeof journalEvent<'requested'>>[0]);
}

function decided(overrides: Partial<DecidedEvent> = {}): DecidedEvent {
  return journalEvent({
    type: 'decided',
    id: 'd1:decided',
    ...WHERE,
    at: AT,
    causationId: 'd1:requested',
    verdict: 'allow',
    decidedBy: 'hook',
    policyRevision: 7,
    inputDigest: inputDigest(POST_HOOK_INPUT),
    input: POST_HOOK_INPUT,
    tool: TOOL,
    agent: { agentType: 'coder' },
    isolation: 'none',
    profile: 'dev',
    ...overrides,
  } as Parameters<typeof journalEvent<'decided'>>[0]);
}

function suspended(overrides: Partial<SuspendedEvent> = {}): SuspendedEvent {
  return journalEvent({
    type: 'suspended',
    id: 'd1:suspended',
    ...WHERE,
    at: AT,
    causationId: 'd1:decided',
    approvalKey: approvalKey(TOOL.name, POST_HOOK_INPUT),
    inputDigest: inputDigest(POST_HOOK_INPUT),
    policyRevision: 7,
    tool: TOOL,
    input: POST_HOOK_INPUT,
    agent: { agentType: 'coder' },
    isolation: 'none',
    profile: 'dev',
    decidedBy: 'ask-rule',
    submittedBy: 'alice',
    expiresAt: '2026-03-02T10:00:00.000Z',
    onTimeout: 'deny',
    ...overrides,
  } as Parameters<typeof journalEvent<'suspended'>>[0]);
}

const facts = (over: Partial<DecisionFacts> = {}): DecisionFacts => ({
  requested: requested(),
  revisionExisted: true,
  ...over,
});

describe('checkDecided: an allow runs only if it matches the recorded request', () => {
  it('accepts the evaluator’s decision, a hook-rewritten input included', () => {
    expect(checkDecided(decided(), facts())).toBeNull();
  });

  it('refuses a decision with no request recorded before it (a forged decided)', () => {
    expect(
      checkDecided(
        decided({ tool: { ...TOOL, contractHash: '0'.repeat(64) }, policyRevision: 0 }),
        facts({ requested: null }),
      ),
    ).toBe('no-request');
  });

  it('refuses a decision whose input is not the one its digest names', () => {
    expect(checkDecided(decided({ input: { path: '/etc/passwd', content: 'x' } }), facts())).toBe(
      'input-digest',
    );
  });

  it('refuses a decision that changes the tool reference, even only its executor or timeout', () => {
    for (const tool of [
      { ...TOOL, contractHash: '0'.repeat(64) },
      { ...TOOL, name: 'shell' },
      { ...TOOL, executor: 'remote' as const },
      { ...TOOL, timeoutMs: 1 },
    ]) {
      expect(checkDecided(decided({ tool }), facts())).toBe('tool');
    }
  });

  it('refuses a decision that changes the agent, the isolation or the profile', () => {
    expect(checkDecided(decided({ isolation: { kind: 'worktree' } }), facts())).toBe('call');
    expect(checkDecided(decided({ agent: { agentType: 'root' } }), facts())).toBe('call');
    expect(checkDecided(decided({ profile: 'prod' }), facts())).toBe('call');
  });

  it('refuses a decision of another dispatch’s request, or of an unknown revision', () => {
    expect(checkDecided(decided(), facts({ requested: requested({ dispatchId: 'd2' }) }))).toBe(
      'no-request',
    );
    expect(checkDecided(decided(), facts({ revisionExisted: false }))).toBe('policy-revision');
  });
});

describe('checkSuspended: a resolution runs a suspension only if it matches the request', () => {
  it('accepts the evaluator’s suspension', () => {
    expect(checkSuspended(suspended(), facts())).toBeNull();
  });

  it('refuses a forged suspension: no request, another input, another approval key', () => {
    expect(checkSuspended(suspended(), facts({ requested: null }))).toBe('no-request');
    expect(checkSuspended(suspended({ input: { path: 'b.txt', content: 'y' } }), facts())).toBe(
      'input-digest',
    );
    expect(checkSuspended(suspended({ approvalKey: 'a'.repeat(64) }), facts())).toBe(
      'approval-key',
    );
  });
});

describe('revisionExisted: could the decision have been taken under this policy revision', () => {
  const D = Date.parse('2026-03-01T10:00:00.000Z');
  const TOL = 2000;
  const none: PolicyHistory = { atRevision: null, oldest: null, newest: null };
  const stored = (revision: number, storedAtMs: number, isValue = true) => ({
    revision,
    storedAtMs,
    isValue,
  });

  it('revision 0 holds when the tenant had no policy then', () => {
    expect(revisionExisted(0, D, none, TOL)).toBe(true);
    // Its first policy came after the decision (beyond the mirror's lag).
    const later = stored(5, D + 60_000);
    expect(revisionExisted(0, D, { atRevision: null, oldest: later, newest: later }, TOL)).toBe(
      true,
    );
    // Its policy was deleted before the decision.
    expect(
      revisionExisted(
        0,
        D,
        { atRevision: null, oldest: stored(5, D - 60_000), newest: stored(9, D - 1000, false) },
        TOL,
      ),
    ).toBe(true);
  });

  it('revision 0 fails when the tenant had a policy then', () => {
    const earlier = stored(5, D - 60_000);
    expect(revisionExisted(0, D, { atRevision: null, oldest: earlier, newest: earlier }, TOL)).toBe(
      false,
    );
    // Deleted only after the decision: a policy was in force when it was taken.
    expect(
      revisionExisted(
        0,
        D,
        { atRevision: null, oldest: earlier, newest: stored(9, D + 60_000, false) },
        TOL,
      ),
    ).toBe(false);
  });

  it('revision n holds when the tenant’s value at n was stored before the decision', () => {
    const at = { ownTenant: true, isValue: true, storedAtMs: D - 1000 };
    expect(revisionExisted(7, D, { ...none, atRevision: at }, TOL)).toBe(true);
    // Within the mirror's lag either way.
    expect(
      revisionExisted(7, D, { ...none, atRevision: { ...at, storedAtMs: D + 500 } }, TOL),
    ).toBe(true);
  });

  it('revision n fails for another tenant’s value, a delete, a later value or a future revision', () => {
    const at = { ownTenant: true, isValue: true, storedAtMs: D - 1000 };
    expect(revisionExisted(7, D, { ...none, atRevision: { ...at, ownTenant: false } }, TOL)).toBe(
      false,
    );
    expect(revisionExisted(7, D, { ...none, atRevision: { ...at, isValue: false } }, TOL)).toBe(
      false,
    );
    expect(
      revisionExisted(7, D, { ...none, atRevision: { ...at, storedAtMs: D + 60_000 } }, TOL),
    ).toBe(false);
    expect(revisionExisted(7, D, none, TOL)).toBe(false);
    const newer = stored(5, D - 60_000);
    expect(revisionExisted(7, D, { atRevision: null, oldest: newer, newest: newer }, TOL)).toBe(
      false,
    );
  });

  it('revision n superseded beyond the bucket’s history is let through', () => {
    const kept = stored(40, D - 1000);
    expect(revisionExisted(7, D, { atRevision: null, oldest: kept, newest: kept }, TOL)).toBe(true);
  });
});
