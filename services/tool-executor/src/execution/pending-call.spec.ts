import {
  journalEvent,
  type DecidedEvent,
  type ResolvedEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';
import { decideOnDecided, decideOnResolved } from './pending-call';

const KEY = 'a'.repeat(64);
const DIGEST = 'b'.repeat(64);
const TOOL = {
  name: 'delete_branch',
  contractHash: 'c'.repeat(64),
  needsApproval: true,
  executor: 'inprocess' as const,
};
const RULE = { source: 'engine', kind: 'ask', id: 'ask-deletes' };
/** What every event of dispatch d1 carries. */
const DISPATCH = {
  tenant: 'acme',
  runId: 'run1',
  dispatchId: 'd1',
  inputDigest: DIGEST,
  policyRevision: 2,
};
/** The call that was decided, then suspended. */
const CALL = { tool: TOOL, input: { branch: 'feature/x' }, agent: { agentType: 'operator' } };

function decided(overrides: Partial<DecidedEvent> = {}): DecidedEvent {
  return journalEvent({
    type: 'decided',
    id: 'd1:decided',
    ...DISPATCH,
    at: '2026-03-01T10:00:00.000Z',
    causationId: 'd1:requested',
    verdict: 'allow',
    decidedBy: 'default',
    ...CALL,
    isolation: { kind: 'worktree' },
    ...overrides,
  } as Parameters<typeof journalEvent<'decided'>>[0]);
}

function suspended(overrides: Partial<SuspendedEvent> = {}): SuspendedEvent {
  return journalEvent({
    type: 'suspended',
    id: 'd1:suspended',
    ...DISPATCH,
    at: '2026-03-01T10:00:00.000Z',
    causationId: 'd1:decided',
    approvalKey: KEY,
    ...CALL,
    isolation: 'none',
    profile: 'ops',
    decidedBy: 'ask-rule',
    rule: RULE,
    submittedBy: 'user:alice',
    expiresAt: '2026-03-01T10:10:00.000Z',
    onTimeout: 'deny',
    ...overrides,
  } as Parameters<typeof journalEvent<'suspended'>>[0]);
}

function resolved(overrides: Partial<ResolvedEvent> = {}): ResolvedEvent {
  return journalEvent({
    type: 'resolved',
    id: 'd1:resolved:attempt-1',
    ...DISPATCH,
    at: '2026-03-01T10:05:00.000Z',
    causationId: 'd1:suspended',
    approvalKey: KEY,
    decision: 'allow',
    by: 'user:bob',
    source: 'human',
    ...overrides,
  } as Parameters<typeof journalEvent<'resolved'>>[0]);
}

describe('decideOnDecided: given a decided event', () => {
  it('allow → run the post-hook input, authorised by the decided event', () => {
    expect(decideOnDecided(decided({ profile: 'ops', decidedBy: 'hook', rule: RULE }))).toEqual({
      kind: 'run',
      call: {
        tenant: 'acme',
        runId: 'run1',
        dispatchId: 'd1',
        tool: TOOL,
        input: { branch: 'feature/x' },
        agent: { agentType: 'operator' },
        isolation: { kind: 'worktree' },
        profile: 'ops',
        causationId: 'd1:decided',
        decidedBy: 'hook',
        rule: RULE,
      },
    });
  });

  it('allow without profile or rule → a call without them', () => {
    const command = decideOnDecided(decided());
    expect(command.kind).toBe('run');
    const call = (command as { call: object }).call;
    expect('profile' in call).toBe(false);
    expect('rule' in call).toBe(false);
  });

  it.each<['deny' | 'ask']>([['deny'], ['ask']])(
    '%s → ignore (the evaluator settles or parks it)',
    (verdict) => {
      expect(decideOnDecided(decided({ verdict, decidedBy: 'deny-rule', reason: 'no' }))).toEqual({
        kind: 'ignore',
        why: `verdict ${verdict}`,
      });
    },
  );
});

describe('decideOnResolved: given a suspended call and its resolution', () => {
  const expectedCall = {
    tenant: 'acme',
    runId: 'run1',
    dispatchId: 'd1',
    tool: TOOL,
    input: { branch: 'feature/x' },
    agent: { agentType: 'operator' },
    isolation: 'none',
    profile: 'ops',
    causationId: 'd1:resolved:attempt-1',
    decidedBy: 'ask-rule',
    rule: RULE,
  };

  it('allow → run the suspended call, authorised by the resolution', () => {
    expect(decideOnResolved(resolved(), suspended())).toEqual({ kind: 'run', call: expectedCall });
  });

  it('deny with a reason → settle denied carrying the reason', () => {
    expect(
      decideOnResolved(resolved({ decision: 'deny', reason: 'not today' }), suspended()),
    ).toEqual({
      kind: 'settle-denied',
      call: expectedCall,
      reason: 'approval denied: not today',
    });
  });

  it('deny without a reason → settle denied', () => {
    expect(decideOnResolved(resolved({ decision: 'deny' }), suspended())).toMatchObject({
      kind: 'settle-denied',
      reason: 'approval denied',
    });
  });

  it('a timeout that applies deny → settle denied with the timeout reason', () => {
    const command = decideOnResolved(
      resolved({
        decision: 'deny',
        source: 'timeout',
        by: 'system:timeout',
        reason: 'approval timed out; deny applied by policy',
      }),
      suspended(),
    );
    expect(command).toMatchObject({
      kind: 'settle-denied',
      reason: 'approval denied: approval timed out; deny applied by policy',
    });
  });

  it.each<[string, Partial<ResolvedEvent>]>([
    ['input digest', { inputDigest: 'e'.repeat(64) }],
    ['approval key', { approvalKey: 'f'.repeat(64) }],
  ])(
    'an allow whose %s differs from the suspended call → settle denied, never run',
    (_what, mismatch) => {
      expect(decideOnResolved(resolved(mismatch), suspended())).toEqual({
        kind: 'settle-denied',
        call: expectedCall,
        reason: 'the resolution does not match the call that was asked for',
      });
    },
  );

  it('no suspended call → ignore', () => {
    expect(decideOnResolved(resolved(), null)).toEqual({
      kind: 'ignore',
      why: 'no suspended call for this resolution',
    });
  });
});
