import { mintTaskId, verifyTaskId } from './mcp-task-id';
import { isTerminal, taskState, type TaskFacts } from './mcp-task-status';

const key = new TextEncoder().encode('k'.repeat(32));
const owner = { tenant: 'acme', identity: 'acme-agent' };
const ref = { runId: 'mcp-run-1', dispatchId: 'a'.repeat(64) };

describe('MCP task ids', () => {
  it('name the dispatch for the principal they were minted for', () => {
    const id = mintTaskId(key, owner, ref);
    expect(verifyTaskId(key, owner, id)).toEqual(ref);
    expect(mintTaskId(key, owner, ref)).toBe(id);
  });

  it('are refused for another tenant, another identity, another key, and when altered', () => {
    const id = mintTaskId(key, owner, ref);
    expect(verifyTaskId(key, { ...owner, tenant: 'globex' }, id)).toBeNull();
    expect(verifyTaskId(key, { ...owner, identity: 'acme-admin' }, id)).toBeNull();
    expect(verifyTaskId(new TextEncoder().encode('x'.repeat(32)), owner, id)).toBeNull();
    // The MAC covers the dispatch: the same MAC on another dispatch or run is refused.
    const [, , , mac] = id.split('.');
    expect(verifyTaskId(key, owner, `tgt1.${ref.runId}.${'b'.repeat(64)}.${mac}`)).toBeNull();
    expect(verifyTaskId(key, owner, `tgt1.other-run.${ref.dispatchId}.${mac}`)).toBeNull();
    const at = id.length - 3;
    expect(
      verifyTaskId(key, owner, id.slice(0, at) + (id[at] === 'A' ? 'B' : 'A') + id.slice(at + 1)),
    ).toBeNull();
  });

  it.each([
    ['not a string', 42],
    ['empty', ''],
    ['too few parts', 'tgt1.run.dispatch'],
    ['another version', mintTaskId(key, owner, ref).replace(/^tgt1/, 'tgt2')],
    ['a token that is not a subject token', `tgt1.a*b.${ref.dispatchId}.x`],
    ['overlong', `tgt1.${'r'.repeat(700)}.d.x`],
  ])('refuses a malformed id (%s)', (_label, id) => {
    expect(verifyTaskId(key, owner, id)).toBeNull();
  });
});

describe('the task status of a dispatch', () => {
  const base: TaskFacts = {
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:01.000Z',
    submittedBy: 'acme-agent',
  };
  const suspended = { approvalKey: 'k'.repeat(64), expiresAt: '2026-01-02T00:00:00.000Z' };

  const cases: [string, Partial<TaskFacts>, string][] = [
    ['being decided or running', {}, 'working'],
    ['parked, unresolved', { suspended }, 'input_required'],
    [
      'allowed, not settled yet',
      { suspended, resolved: { decision: 'allow', by: 'bob' } },
      'working',
    ],
    [
      'denied by a person, not settled yet',
      { suspended, resolved: { decision: 'deny', by: 'bob' } },
      'working',
    ],
    [
      'withdrawn by its submitter',
      { suspended, resolved: { decision: 'deny', by: 'acme-agent' } },
      'cancelled',
    ],
    [
      'withdrawn and settled denied',
      {
        suspended,
        resolved: { decision: 'deny', by: 'acme-agent' },
        settled: { outcome: 'denied', errorCode: 'denied' },
      },
      'cancelled',
    ],
    ['settled ok', { settled: { outcome: 'ok' } }, 'completed'],
    [
      'settled ok after an allow',
      { suspended, resolved: { decision: 'allow', by: 'bob' }, settled: { outcome: 'ok' } },
      'completed',
    ],
    [
      'denied by a person',
      {
        suspended,
        resolved: { decision: 'deny', by: 'bob', reason: 'no' },
        settled: { outcome: 'denied', errorCode: 'denied' },
      },
      'failed',
    ],
    ['denied by the chain', { settled: { outcome: 'denied', errorCode: 'denied' } }, 'failed'],
    ['a tool error', { settled: { outcome: 'error', errorCode: 'tool-failed' } }, 'failed'],
    [
      'cancelled while it ran',
      { settled: { outcome: 'error', errorCode: 'cancelled' } },
      'cancelled',
    ],
  ];
  it.each(cases.map(([label, facts, status]) => [label, status, facts] as const))(
    '%s → %s',
    (_label, status, facts) => {
      expect(taskState({ ...base, ...facts }).status).toBe(status);
    },
  );

  it("names the approval a parked task waits for, and a person's reason for a deny", () => {
    expect(taskState({ ...base, suspended }).statusMessage).toContain(suspended.approvalKey);
    expect(
      taskState({
        ...base,
        suspended,
        resolved: { decision: 'deny', by: 'bob', reason: 'not today' },
        settled: { outcome: 'denied' },
      }).statusMessage,
    ).toBe('denied: not today');
  });

  it('terminal statuses are the three the spec names', () => {
    expect(
      ['working', 'input_required', 'completed', 'failed', 'cancelled'].filter((s) =>
        isTerminal(s as never),
      ),
    ).toEqual(['completed', 'failed', 'cancelled']);
  });
});
