import {
  DISPATCH_REPLY_BUDGET_BYTES,
  journalEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';
import { approvalDetail, boundedApprovalDetail } from './approval-detail';

const KEY = 'a'.repeat(64);
const DIGEST = 'b'.repeat(64);
const envelope = (type: string, at: string) => ({
  id: `d1:${type}`,
  tenant: 'acme',
  runId: 'run1',
  dispatchId: 'd1',
  at,
  causationId: null,
});

/** given: a call parked for approval, validated by the contracts' own schema. */
function suspended(tool: string, input: unknown, rule: unknown): SuspendedEvent {
  return journalEvent<'suspended'>({
    ...envelope('suspended', '2026-03-01T10:00:00.000Z'),
    type: 'suspended',
    approvalKey: KEY,
    inputDigest: DIGEST,
    policyRevision: 7,
    tool: { name: tool, contractHash: 'c'.repeat(64), needsApproval: false, executor: 'inprocess' },
    input,
    agent: { agentType: 'coder', label: 'bot' },
    isolation: 'none',
    decidedBy: 'ask-rule',
    rule,
    submittedBy: 'agent-1',
    expiresAt: '2026-03-02T10:00:00.000Z',
    onTimeout: 'deny',
    separationOfDuties: false,
  });
}

describe('approvalDetail', () => {
  it('a pending call: the approval as the projection folds it, the ask reason and the risk', () => {
    const s = suspended('delete_branch', { branch: 'main' }, { kind: 'rule', tool: 'x' });
    const decided = journalEvent<'decided'>({
      ...envelope('decided', '2026-03-01T10:00:00.000Z'),
      type: 'decided',
      verdict: 'ask',
      decidedBy: 'ask-rule',
      reason: 'branches need a second pair of eyes',
      policyRevision: 7,
      inputDigest: DIGEST,
      input: { branch: 'main' },
      tool: s.tool,
      agent: s.agent,
      isolation: 'none',
    });
    const detail = approvalDetail({ suspended: s, decided });
    expect(detail).toEqual({
      approval: expect.objectContaining({
        status: 'pending',
        approvalKey: KEY,
        inputDigest: DIGEST,
        policyRevision: 7,
        toolName: 'delete_branch',
        input: { branch: 'main' },
        rule: { kind: 'rule', tool: 'x' },
        suspendedAt: '2026-03-01T10:00:00.000Z',
        expiresAt: '2026-03-02T10:00:00.000Z',
        decision: null,
        resolvedBy: null,
        settled: null,
        updatedAt: '2026-03-01T10:00:00.000Z',
      }),
      askReason: 'branches need a second pair of eyes',
      risk: 'undeclared',
      shell: null,
      elided: [],
      shellElided: false,
    });
  });

  it('a resolved call that ran: who resolved it, and how the call ended', () => {
    const s = suspended('delete_branch', { branch: 'main' }, undefined);
    const resolved = journalEvent<'resolved'>({
      ...envelope('resolved', '2026-03-01T10:05:00.000Z'),
      type: 'resolved',
      approvalKey: KEY,
      inputDigest: DIGEST,
      policyRevision: 7,
      decision: 'allow',
      reason: 'fine',
      by: 'bob',
      source: 'human',
    });
    const settled = journalEvent<'settled'>({
      ...envelope('settled', '2026-03-01T10:05:01.000Z'),
      type: 'settled',
      toolName: 'delete_branch',
      outcome: 'error',
      error: { code: 'tool-failed', message: 'no such branch' },
      durationMs: 3,
      attempt: 1,
    });
    const { approval, askReason } = approvalDetail({ suspended: s, resolved, settled });
    expect(approval).toMatchObject({
      status: 'resolved',
      decision: 'allow',
      reason: 'fine',
      resolvedBy: 'bob',
      source: 'human',
      resolvedAt: '2026-03-01T10:05:00.000Z',
      rule: null,
      settled: { outcome: 'error', errorCode: 'tool-failed', at: '2026-03-01T10:05:01.000Z' },
      updatedAt: '2026-03-01T10:05:01.000Z',
    });
    expect(askReason).toBeNull();
  });

  it('a shell call: its segments, the one the rule asked about marked', () => {
    const rule = { source: 'engine', kind: 'rule', layer: 'ask', index: 0, argv: 'rm **' };
    const s = suspended('shell', { command: 'ls && rm -rf build' }, rule);
    expect(approvalDetail({ suspended: s }).shell).toEqual({
      command: 'ls && rm -rf build',
      scope: 'segments',
      segments: [
        { argv: ['ls'], asked: false, why: null, unmatchable: null },
        { argv: ['rm', '-rf', 'build'], asked: true, why: 'matches rm **', unmatchable: null },
      ],
    });
    // A shell call whose input has no command string has nothing to parse.
    expect(approvalDetail({ suspended: suspended('shell', { cmd: 1 }, rule) }).shell).toBeNull();
  });

  it('stays within the reply budget whatever the input: the input as its preview, then no shell segments', () => {
    const size = (v: unknown) => Buffer.byteLength(JSON.stringify(v));
    const input = { text: `"é😀-${'x'.repeat(900_000)}` };
    const whole = approvalDetail({ suspended: suspended('write_note', input, null) });
    expect(whole.approval.input).toEqual(input);
    const big = boundedApprovalDetail(whole);
    expect(size(big)).toBeLessThanOrEqual(DISPATCH_REPLY_BUDGET_BYTES);
    expect(big.elided).toEqual(['effectiveInput']);
    expect(big.approval.input).toEqual({
      kind: 'elided',
      preview: expect.objectContaining({ bytes: size(input), truncated: true }),
    });
    expect(big.shellElided).toBe(false);

    // A shell command of ~1 MB: its segments alone would pass the budget.
    const rule = { source: 'engine', kind: 'rule', layer: 'ask', index: 0, argv: 'echo **' };
    const words = Array.from({ length: 60_000 }, (_, i) => `w${i}`).join(' ');
    const shell = boundedApprovalDetail(
      approvalDetail({
        suspended: suspended('shell', { command: `echo ${words} && rm -rf /` }, rule),
      }),
    );
    expect(size(shell)).toBeLessThanOrEqual(DISPATCH_REPLY_BUDGET_BYTES);
    expect({ elided: shell.elided, shell: shell.shell, shellElided: shell.shellElided }).toEqual({
      elided: ['effectiveInput'],
      shell: null,
      shellElided: true,
    });

    // Within the budget nothing is elided.
    const small = boundedApprovalDetail(
      approvalDetail({ suspended: suspended('write_note', { text: 'hi' }, null) }),
    );
    expect({
      elided: small.elided,
      shellElided: small.shellElided,
      input: small.approval.input,
    }).toEqual({
      elided: [],
      shellElided: false,
      input: { text: 'hi' },
    });
  });
});
