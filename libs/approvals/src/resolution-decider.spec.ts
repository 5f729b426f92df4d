import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import {
  APPROVAL_KEY as KEY,
  INPUT_DIGEST as DIGEST,
  suspendedEvent as suspended,
} from '../test/fixtures/suspended-event.fixture';
import { decideResolution, type ResolutionCommand } from './resolution-decider';

const AT = new Date('2026-03-01T10:00:00.000Z');

/** when: a resolution arrives. */
function command(overrides: Partial<ResolutionCommand> = {}): ResolutionCommand {
  return {
    decision: 'allow',
    by: 'user:bob',
    source: 'human',
    approvalKey: KEY,
    at: AT,
    attemptId: 'attempt-1',
    ...overrides,
  };
}

function refusal(fn: () => unknown): ToolgateError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ToolgateError);
    return err as ToolgateError;
  }
  throw new Error('expected the resolution to be refused');
}

describe('decideResolution: given a parked call, when a resolution arrives, then', () => {
  it('an allow becomes a resolved event with the full envelope', () => {
    expect(decideResolution(suspended(), command({ reason: 'looks fine' }))).toEqual({
      type: 'resolved',
      schemaVersion: expect.any(Number),
      id: 'd1:resolved:attempt-1',
      tenant: 'acme',
      runId: 'run1',
      dispatchId: 'd1',
      at: '2026-03-01T10:00:00.000Z',
      causationId: 'd1:suspended',
      approvalKey: KEY,
      inputDigest: DIGEST,
      policyRevision: 7,
      decision: 'allow',
      reason: 'looks fine',
      by: 'user:bob',
      source: 'human',
    });
  });

  it('the event id includes the attempt id, so racing attempts are not deduplicated', () => {
    const a = decideResolution(suspended(), command({ attemptId: 'x1' }));
    const b = decideResolution(suspended(), command({ attemptId: 'x2' }));
    expect(a.id).toContain('x1');
    expect(b.id).toContain('x2');
    expect(a.id).not.toBe(b.id);
  });

  it.each<[string, 'allow' | 'deny', unknown]>([
    ['"allow"', 'allow', 'allow'],
    ['{ decision: "allow" }', 'allow', { decision: 'allow' }],
    ['"deny"', 'deny', 'deny'],
    ['{ decision: "deny" }', 'deny', { decision: 'deny' }],
    ['"ALLOW" (fails closed)', 'deny', 'ALLOW'],
    ['true (fails closed)', 'deny', true],
    ['"yes" (fails closed)', 'deny', 'yes'],
    ['null (fails closed)', 'deny', null],
    ['undefined (fails closed)', 'deny', undefined],
    ['{ decision: true } (fails closed)', 'deny', { decision: true }],
  ])('a decision of %s normalises to %s', (_what, expected, decision) => {
    expect(decideResolution(suspended(), command({ decision })).decision).toBe(expected);
  });

  it('a deny carries its reason, and no reason stays absent', () => {
    expect(
      decideResolution(suspended(), command({ decision: 'deny', reason: 'not on main' })).reason,
    ).toBe('not on main');
    expect('reason' in decideResolution(suspended(), command({ decision: 'deny' }))).toBe(false);
  });

  it.each<['allow' | 'deny', unknown]>([
    ['deny', 'allow'],
    ['allow', 'deny'],
    ['allow', 'garbage'],
  ])(
    'a timeout applies onTimeout=%s whatever decision it was given (%s)',
    (onTimeout, decision) => {
      const resolved = decideResolution(
        suspended({ onTimeout }),
        command({ decision, by: 'system:timeout', source: 'timeout' }),
      );
      expect(resolved).toMatchObject({
        decision: onTimeout,
        by: 'system:timeout',
        source: 'timeout',
        reason: `approval timed out; ${onTimeout} applied by policy`,
      });
    },
  );

  it("a person's resolution once the window has ended applies the policy's onTimeout, not theirs", () => {
    // The fixture's window ends at 10:09 and denies on timeout; a sweeper late by minutes must not
    // leave the call to whoever clicks first.
    for (const at of ['2026-03-01T10:09:00.000Z', '2026-03-01T10:12:00.000Z']) {
      const event = decideResolution(suspended(), command({ at: new Date(at), reason: 'lgtm' }));
      expect(event).toMatchObject({ decision: 'deny', by: 'system:timeout', source: 'timeout' });
      expect(event.reason).toContain('asked by user:bob');
    }
    const allowOnTimeout = suspended({ onTimeout: 'allow' });
    expect(
      decideResolution(
        allowOnTimeout,
        command({ decision: 'deny', at: new Date('2026-03-01T10:10:00.000Z') }),
      ),
    ).toMatchObject({ decision: 'allow', source: 'timeout' });
    // A moment before the end, the person decides.
    expect(
      decideResolution(suspended(), command({ at: new Date('2026-03-01T10:08:59.999Z') })),
    ).toMatchObject({ decision: 'allow', by: 'user:bob', source: 'human' });
  });

  it('a resolution whose input digest differs is an approval-mismatch', () => {
    const err = refusal(() =>
      decideResolution(suspended(), command({ inputDigest: 'e'.repeat(64) })),
    );
    expect(err.code).toBe(ErrorCode.ApprovalMismatch);
    expect(err.details).toMatchObject({ dispatchId: 'd1', expected: DIGEST });
  });

  it('a resolution naming the matching digest is accepted', () => {
    expect(decideResolution(suspended(), command({ inputDigest: DIGEST })).decision).toBe('allow');
  });

  it('a resolution naming another approval key is an approval-mismatch', () => {
    const err = refusal(() =>
      decideResolution(suspended(), command({ approvalKey: 'f'.repeat(64) })),
    );
    expect(err.code).toBe(ErrorCode.ApprovalMismatch);
  });

  describe('under separation of duties', () => {
    const sod = () => suspended({ separationOfDuties: true });

    it('the submitter resolving as a human is forbidden', () => {
      const err = refusal(() => decideResolution(sod(), command({ by: 'user:alice' })));
      expect(err.code).toBe(ErrorCode.Forbidden);
    });

    it('the submitter is forbidden from denying too', () => {
      const err = refusal(() =>
        decideResolution(sod(), command({ by: 'user:alice', decision: 'deny' })),
      );
      expect(err.code).toBe(ErrorCode.Forbidden);
    });

    it('anyone else may resolve', () => {
      expect(decideResolution(sod(), command({ by: 'user:bob' })).by).toBe('user:bob');
    });

    it.each<['timeout' | 'policy']>([['timeout'], ['policy']])(
      'a %s resolution under the submitter identity is not refused',
      (source) => {
        expect(decideResolution(sod(), command({ by: 'user:alice', source })).source).toBe(source);
      },
    );
  });

  it('without separation of duties the submitter may approve its own call', () => {
    expect(decideResolution(suspended(), command({ by: 'user:alice' })).decision).toBe('allow');
  });
});
