import { journalEvent, type ToolRef } from '@toolgate/contracts';
import { toDispatchEvent } from './tool-events';

const envelope = {
  tenant: 'acme',
  runId: 'run-1',
  dispatchId: 'd1',
  at: '2025-01-01T00:00:00.000Z',
  causationId: null,
};
const hash = 'a'.repeat(64);

describe('toDispatchEvent', () => {
  it("maps started to tool:start in the 003 shape, with the caller's call id and the tool's risk", () => {
    const started = journalEvent({
      ...envelope,
      type: 'started',
      id: 'd1:started:1',
      attempt: 1,
      toolName: 'greet',
      executor: 'remote',
    });
    expect(toDispatchEvent(started, { callId: 'c1', risk: 'read' })).toEqual({
      type: 'tool:start',
      toolName: 'greet',
      toolCallId: 'c1',
      risk: 'read',
    });
  });

  it('maps settled to tool:end, completing the audit fields from the decided verdict', () => {
    const settled = journalEvent({
      ...envelope,
      type: 'settled',
      id: 'd1:settled',
      toolName: 'greet',
      outcome: 'error',
      error: { code: 'model-retry', message: 'again' },
      durationMs: 12,
      attempt: 1,
    });
    expect(
      toDispatchEvent(settled, {
        callId: 'c1',
        decision: { verdict: 'allow', decidedBy: 'default' },
      }),
    ).toEqual({
      type: 'tool:end',
      toolName: 'greet',
      toolCallId: 'c1',
      outcome: 'error',
      durationMs: 12,
      errorCode: 'model-retry',
      verdict: 'allow',
      decidedBy: 'default',
    });
  });

  it("keeps a denial's own verdict and carries no errorCode (it is not an error outcome)", () => {
    const settled = journalEvent({
      ...envelope,
      type: 'settled',
      id: 'd1:settled',
      toolName: 'shell',
      outcome: 'denied',
      error: { code: 'denied', message: 'no' },
      durationMs: 0,
      attempt: 0,
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { tool: 'shell' },
    });
    expect(
      toDispatchEvent(settled, {
        callId: 'c2',
        decision: { verdict: 'allow', decidedBy: 'default' },
      }),
    ).toEqual({
      type: 'tool:end',
      toolName: 'shell',
      toolCallId: 'c2',
      outcome: 'denied',
      durationMs: 0,
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { tool: 'shell' },
    });
  });

  it('maps suspended to approval:pending with what a person needs to decide', () => {
    const suspended = journalEvent({
      ...envelope,
      type: 'suspended',
      id: 'd1:suspended',
      approvalKey: 'b'.repeat(64),
      inputDigest: 'c'.repeat(64),
      policyRevision: 3,
      tool: { name: 'shell', contractHash: hash, needsApproval: false, executor: 'inprocess' },
      input: { command: 'ls' },
      agent: { agentType: 'coder' },
      isolation: 'none',
      decidedBy: 'ask-rule',
      rule: { tool: 'shell' },
      submittedBy: 'acme-agent',
      expiresAt: '2025-01-02T00:00:00.000Z',
      onTimeout: 'deny',
    });
    expect(toDispatchEvent(suspended, { callId: 'c3' })).toEqual({
      type: 'approval:pending',
      key: 'b'.repeat(64),
      dispatchId: 'd1',
      toolName: 'shell',
      input: { command: 'ls' },
      rule: { tool: 'shell' },
      expiresAt: '2025-01-02T00:00:00.000Z',
      onTimeout: 'deny',
    });
  });

  it('surfaces nothing for requested, decided and resolved', () => {
    const tool: ToolRef = {
      name: 'shell',
      contractHash: hash,
      needsApproval: false,
      executor: 'inprocess',
    };
    const requested = journalEvent({
      ...envelope,
      type: 'requested',
      id: 'd1:requested',
      callId: 'c3',
      tool,
      input: { command: 'ls' },
      agent: { agentType: 'coder' },
      isolation: 'none',
      submittedBy: 'acme-agent',
    });
    const decided = journalEvent({
      ...envelope,
      type: 'decided',
      id: 'd1:decided',
      verdict: 'allow',
      decidedBy: 'default',
      policyRevision: 3,
      inputDigest: 'c'.repeat(64),
      input: { command: 'ls' },
      tool,
      agent: { agentType: 'coder' },
      isolation: 'none',
    });
    const resolved = journalEvent({
      ...envelope,
      type: 'resolved',
      id: 'd1:resolved',
      approvalKey: 'b'.repeat(64),
      inputDigest: 'c'.repeat(64),
      policyRevision: 3,
      decision: 'allow',
      by: 'ops',
      source: 'human',
    });
    for (const event of [requested, decided, resolved]) {
      expect(toDispatchEvent(event, { callId: 'c3' })).toBeUndefined();
    }
  });
});
