import { approvalKey, ErrorCode, inputDigest, type RequestedEvent } from '@toolgate/contracts';
import { requestedEvent as requested, TOOL } from '../../test/fixtures/requested-event.fixture';
import { decidedFor, failClosedAnswer, followUpsFor, type ChainAnswer } from './decision-events';

const AT = new Date('2026-03-01T10:00:00.000Z');

function answer(
  decision: Partial<ChainAnswer['decision']> & Pick<ChainAnswer['decision'], 'verdict'>,
  extra: Partial<ChainAnswer> = {},
): ChainAnswer {
  return {
    decision: { decidedBy: 'default', input: { branch: 'feature/x' }, advisory: [], ...decision },
    revision: 3,
    separationOfDuties: false,
    ...extra,
  };
}

/** when the chain answers, then: the decided event and its follow-ups. */
function decide(req: RequestedEvent, ans: ChainAnswer, at = AT) {
  const decided = decidedFor(req, ans, at);
  const followUps = followUpsFor(
    req,
    decided,
    { separationOfDuties: ans.separationOfDuties, approval: ans.decision.approval },
    at,
  );
  return { decided, followUps };
}

describe('decidedFor', () => {
  it('records the verdict, the post-hook input and its digest, and the revision, caused by the request', () => {
    const { decided } = decide(
      requested({ profile: 'ops' }),
      answer({
        verdict: 'allow',
        decidedBy: 'hook',
        input: { branch: 'feature/y' },
        advisory: [{ layer: 'deny', host: 'a.example', rule: { source: 'engine', kind: 'deny' } }],
      }),
    );
    expect(decided).toEqual({
      type: 'decided',
      schemaVersion: expect.any(Number),
      id: 'd1:decided',
      tenant: 'acme',
      runId: 'run1',
      dispatchId: 'd1',
      at: AT.toISOString(),
      causationId: 'd1:requested',
      verdict: 'allow',
      decidedBy: 'hook',
      policyRevision: 3,
      inputDigest: inputDigest({ branch: 'feature/y' }),
      input: { branch: 'feature/y' },
      advisory: [{ layer: 'deny', host: 'a.example', rule: { source: 'engine', kind: 'deny' } }],
      tool: TOOL,
      agent: { agentType: 'operator' },
      isolation: 'none',
      profile: 'ops',
    });
  });

  it('bounds a long reason and keeps the rule', () => {
    const { decided } = decide(
      requested(),
      answer({
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: { source: 'engine', kind: 'deny', id: 'r1' },
        reason: 'x'.repeat(5000),
      }),
    );
    expect(decided.reason).toHaveLength(2048);
    expect(decided.rule).toEqual({ source: 'engine', kind: 'deny', id: 'r1' });
  });

  it('an undefined post-hook input is recorded as null with the digest of null', () => {
    const { decided } = decide(requested(), answer({ verdict: 'allow', input: undefined }));
    expect(decided.input).toBeNull();
    expect(decided.inputDigest).toBe(inputDigest(null));
  });
});

describe('followUpsFor: given a requested call, when the chain answers', () => {
  it('allow → no follow-ups (the executor acts on decided)', () => {
    expect(decide(requested(), answer({ verdict: 'allow' })).followUps).toEqual([]);
  });

  it('deny → one settled event, outcome denied, with the policy reason as the message', () => {
    const { decided, followUps } = decide(
      requested(),
      answer({
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: { source: 'engine', kind: 'deny', id: 'no-deletes' },
        reason: 'branches are never deleted by agents',
      }),
    );
    expect(followUps).toEqual([
      {
        type: 'settled',
        schemaVersion: expect.any(Number),
        id: 'd1:settled',
        tenant: 'acme',
        runId: 'run1',
        dispatchId: 'd1',
        at: AT.toISOString(),
        causationId: decided.id,
        toolName: 'delete_branch',
        outcome: 'denied',
        error: {
          code: ErrorCode.Denied,
          message: 'branches are never deleted by agents',
          details: { decidedBy: 'deny-rule', policyRevision: 3 },
        },
        durationMs: 0,
        attempt: 0,
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: { source: 'engine', kind: 'deny', id: 'no-deletes' },
      },
    ]);
  });

  it('deny without a reason → a message naming the tool and what decided', () => {
    const [settled] = decide(
      requested(),
      answer({ verdict: 'deny', decidedBy: 'canUseTool' }),
    ).followUps;
    expect(settled).toMatchObject({
      type: 'settled',
      error: { message: 'delete_branch was denied by policy (canUseTool)' },
    });
  });

  it('ask → one suspended event keyed on the post-hook input, expiring after the approval window', () => {
    const postHook = { branch: 'feature/x', force: false };
    const { decided, followUps } = decide(
      requested({ profile: 'ops' }),
      answer(
        {
          verdict: 'ask',
          decidedBy: 'ask-rule',
          rule: { source: 'profile:ops', kind: 'ask', id: 'ask-deletes' },
          reason: 'deleting a branch needs a person',
          input: postHook,
          approval: { timeoutMs: 600_000, onTimeout: 'allow' },
        },
        { separationOfDuties: true },
      ),
    );
    expect(followUps).toEqual([
      {
        type: 'suspended',
        schemaVersion: expect.any(Number),
        id: 'd1:suspended',
        tenant: 'acme',
        runId: 'run1',
        dispatchId: 'd1',
        at: AT.toISOString(),
        causationId: decided.id,
        approvalKey: approvalKey('delete_branch', postHook),
        inputDigest: inputDigest(postHook),
        policyRevision: 3,
        tool: TOOL,
        input: postHook,
        agent: { agentType: 'operator' },
        isolation: 'none',
        profile: 'ops',
        decidedBy: 'ask-rule',
        rule: { source: 'profile:ops', kind: 'ask', id: 'ask-deletes' },
        submittedBy: 'user:alice',
        expiresAt: '2026-03-01T10:10:00.000Z',
        onTimeout: 'allow',
        separationOfDuties: true,
      },
    ]);
    // The key names the input the approver sees, not the one the model sent.
    expect((followUps[0] as { approvalKey: string }).approvalKey).not.toBe(
      approvalKey('delete_branch', requested().input),
    );
  });

  it('ask without approval settings → a 24 h window that denies on timeout', () => {
    const [suspended] = decide(
      requested(),
      answer({ verdict: 'ask', decidedBy: 'default' }),
    ).followUps;
    expect(suspended).toMatchObject({
      type: 'suspended',
      expiresAt: '2026-03-02T10:00:00.000Z',
      onTimeout: 'deny',
      separationOfDuties: false,
    });
  });

  it('a redelivery completing a recorded ask keeps the recorded decision time as the start of the window', () => {
    const req = requested();
    const ans = answer({ verdict: 'ask', approval: { timeoutMs: 60_000, onTimeout: 'deny' } });
    const recorded = decidedFor(req, ans, AT);
    const later = new Date(AT.getTime() + 30_000);
    const [suspended] = followUpsFor(
      req,
      recorded,
      { separationOfDuties: false, approval: ans.decision.approval },
      later,
    );
    expect(suspended).toMatchObject({
      at: later.toISOString(),
      expiresAt: '2026-03-01T10:01:00.000Z',
    });
  });
});

describe('failClosedAnswer', () => {
  it('a chain that cannot be evaluated denies by default at revision 0, keeping the input and reason', () => {
    const ans = failClosedAnswer(
      { branch: 'main' },
      'policy could not be evaluated: unknown profile "x"',
    );
    expect(ans).toEqual({
      decision: {
        verdict: 'deny',
        decidedBy: 'default',
        reason: 'policy could not be evaluated: unknown profile "x"',
        input: { branch: 'main' },
        advisory: [],
      },
      revision: 0,
      separationOfDuties: false,
    });
    const { followUps } = decide(requested(), ans);
    expect(followUps).toEqual([
      expect.objectContaining({
        type: 'settled',
        outcome: 'denied',
        error: expect.objectContaining({
          code: ErrorCode.Denied,
          message: 'policy could not be evaluated: unknown profile "x"',
        }),
      }),
    ]);
  });
});
