import {
  approvalKey,
  ErrorCode,
  inputDigest,
  journalEvent,
  ToolgateError,
  type ApprovalDetail,
  type DispatchOutcome,
  type SettledEvent,
  type SuspendedEvent,
} from '@toolgate/contracts';
import { DispatchHandleImpl } from './dispatch-handle';
import type { ApprovalPendingEvent, ToolEndEvent } from './tool-events';

const denied = { code: ErrorCode.Denied, message: 'refused' };

/**
 * A handle whose asks for the recorded outcome are answered by `recorded`, and for a recorded
 * approval by `approval` (both counted).
 */
function handle(
  recorded: () => Promise<DispatchOutcome | null> = async () => null,
  approval: (key: string) => Promise<ApprovalDetail> = async () => {
    throw new ToolgateError(ErrorCode.NotFound, 'no such approval');
  },
) {
  const asks = { count: 0, approvals: 0, done: 0 };
  const h = new DispatchHandleImpl(
    'd1',
    'run1',
    'accepted',
    { callId: 'c1' },
    () => Promise.reject(new Error('not used')),
    () => asks.done++,
    () => {
      asks.count++;
      return recorded();
    },
    (key) => {
      asks.approvals++;
      return approval(key);
    },
  );
  return Object.assign(h, { asks });
}

/** A parked call of d1 as the run's subjects carry it; its key made from its input unless given. */
function suspended(id: string, input: unknown, key = approvalKey('deploy', input)): SuspendedEvent {
  return journalEvent({
    type: 'suspended',
    id,
    tenant: 'acme',
    runId: 'run1',
    dispatchId: 'd1',
    at: '2026-12-06T10:00:00.000Z',
    causationId: 'd1:decided',
    approvalKey: key,
    inputDigest: inputDigest(input),
    policyRevision: 1,
    tool: {
      name: 'deploy',
      contractHash: 'a'.repeat(64),
      needsApproval: false,
      executor: 'remote',
    },
    input,
    agent: { agentType: 'coder' },
    isolation: 'none',
    decidedBy: 'ask-rule',
    submittedBy: 'acme-agent',
    expiresAt: '2026-12-06T11:00:00.000Z',
    onTimeout: 'deny',
  }) as SuspendedEvent;
}

/** The approval the journal recorded for `event`, as `approvals.get` answers it. */
function recordedApproval(
  event: SuspendedEvent,
  changes: Partial<ApprovalDetail['approval']> = {},
): ApprovalDetail {
  return {
    approval: {
      tenant: 'acme',
      runId: event.runId,
      dispatchId: event.dispatchId,
      approvalKey: event.approvalKey,
      inputDigest: event.inputDigest,
      policyRevision: 1,
      status: 'pending',
      toolName: event.tool.name,
      rule: { tool: 'deploy' },
      onTimeout: 'deny',
      expiresAt: event.expiresAt,
      input: event.input,
      ...changes,
    },
  } as unknown as ApprovalDetail;
}

const tick = (ms = 20) => new Promise((resolve) => setTimeout(resolve, ms));

/** A settlement of d1 as the run's subjects carry it. */
function settled(id: string, outcome: 'ok' | 'error'): SettledEvent {
  return journalEvent({
    type: 'settled',
    id,
    tenant: 'acme',
    runId: 'run1',
    dispatchId: 'd1',
    at: '2026-12-06T10:00:00.000Z',
    causationId: 'd1:started',
    toolName: 'echo',
    outcome,
    ...(outcome === 'ok'
      ? { result: { from: id } }
      : { error: { code: 'timeout', message: `from ${id}` } }),
    durationMs: 1,
    attempt: 1,
  }) as SettledEvent;
}

describe('a dispatch handle’s result', () => {
  it('is the outcome the journal recorded, asked for once a settlement is heard — not the one heard', async () => {
    const h = handle(async () => ({ outcome: 'ok', result: { from: 'd1:settled' } }));
    // Heard first: a forgery on an open broker, or the losing settlement of a race.
    h.feed(settled('d1:settled:a', 'error'));
    h.feed(settled('d1:settled', 'ok'));
    await expect(h.result).resolves.toEqual({ outcome: 'ok', result: { from: 'd1:settled' } });
    expect(h.asks.count).toBe(1);
  });

  it('keeps asking while the journal records no settlement, and ends with the one it records', async () => {
    const answers: (DispatchOutcome | null)[] = [null, null, { outcome: 'denied', error: denied }];
    const h = handle(async () => answers.shift() ?? null);
    let finished = false;
    void h.result.then(() => (finished = true));
    h.feed(settled('d1:forged', 'ok'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(finished).toBe(false);
    await expect(h.result).resolves.toEqual({ outcome: 'denied', error: denied });
    expect(h.asks.count).toBe(3);
  });

  it('asks again after a retryable failure, and fails with any other', async () => {
    const failures = [new ToolgateError(ErrorCode.Unavailable, 'gateway restarting')];
    const h = handle(async () => {
      const next = failures.shift();
      if (next) throw next;
      return { outcome: 'ok', result: 1 };
    });
    h.feed(settled('d1:settled', 'ok'));
    await expect(h.result).resolves.toEqual({ outcome: 'ok', result: 1 });

    const refused = handle(async () => {
      throw new ToolgateError(ErrorCode.Forbidden, 'this token lacks a "dispatch" scope');
    });
    refused.feed(settled('d1:settled', 'ok'));
    await expect(refused.result).rejects.toMatchObject({ code: ErrorCode.Forbidden });
  });

  it('is the recorded outcome the gateway answered, whatever settlement is heard first, without asking', async () => {
    const h = handle();
    h.recorded({ outcome: 'ok', result: { from: 'd1:settled' } });
    // The losing settlement of a race: refused by the stream, still heard on the run's subjects.
    h.feed(settled('d1:settled:a', 'error'));
    await expect(h.result).resolves.toEqual({ outcome: 'ok', result: { from: 'd1:settled' } });
    expect(h.asks.count).toBe(0);
  });

  it('stops asking when the client closes', async () => {
    const h = handle();
    h.feed(settled('d1:forged', 'ok'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    h.abandon('closing');
    await expect(h.result).rejects.toMatchObject({ code: ErrorCode.Cancelled });
    const asked = h.asks.count;
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(h.asks.count).toBe(asked);
  });
});

describe('a dispatch handle’s approval:pending', () => {
  const genuine = suspended('d1:suspended', { service: 'prod-db', action: 'drop' });

  it('surfaces a heard parked call once the gateway answers that the journal recorded it', async () => {
    const h = handle(undefined, async () => recordedApproval(genuine));
    const seen: ApprovalPendingEvent[] = [];
    h.on('approval:pending', (e) => seen.push(e));
    h.feed(genuine);
    await tick();
    expect(seen).toEqual([
      {
        type: 'approval:pending',
        key: genuine.approvalKey,
        dispatchId: 'd1',
        toolName: 'deploy',
        input: { service: 'prod-db', action: 'drop' },
        rule: { tool: 'deploy' },
        expiresAt: genuine.expiresAt,
        onTimeout: 'deny',
      },
    ]);
  });

  it('never surfaces a harmless input under a harmful call’s key, nor a call the journal does not hold', async () => {
    const h = handle(undefined, async (key) => {
      if (key === genuine.approvalKey) return recordedApproval(genuine);
      throw new ToolgateError(ErrorCode.NotFound, 'no such approval');
    });
    const seen: ApprovalPendingEvent[] = [];
    h.on('approval:pending', (e) => seen.push(e));
    // The genuine key over a harmless input: refused without asking (the input does not make it).
    h.feed(suspended('f1', { service: 'staging' }, genuine.approvalKey));
    // A consistent forgery, and one for another tenant's view of the same key: not recorded here.
    h.feed(suspended('f2', { service: 'staging' }));
    await tick(150);
    expect(seen).toEqual([]);
    expect(h.asks.approvals).toBeGreaterThanOrEqual(1);
    h.abandon('done');
  });

  it('never surfaces what the journal records differently: another input, dispatch or a resolved call', async () => {
    for (const changes of [
      { inputDigest: inputDigest({ service: 'other' }) },
      { dispatchId: 'd2' },
      { runId: 'run2' },
      { status: 'resolved' as const },
    ]) {
      const h = handle(undefined, async () => recordedApproval(genuine, changes));
      const seen: ApprovalPendingEvent[] = [];
      h.on('approval:pending', (e) => seen.push(e));
      h.feed(genuine);
      await tick();
      expect({ changes, seen }).toEqual({ changes, seen: [] });
    }
  });

  it('surfaces the genuine one when a forgery reusing its id was heard first, and a copy heard again once', async () => {
    const h = handle(undefined, async () => recordedApproval(genuine));
    const seen: ApprovalPendingEvent[] = [];
    h.on('approval:pending', (e) => seen.push(e));
    h.feed(suspended(genuine.id, { service: 'staging' }, genuine.approvalKey));
    h.feed(genuine);
    h.feed({ ...genuine, at: '2026-12-06T10:00:00.001Z' }); // another copy of it (a retry)
    await tick();
    expect(seen.map((e) => e.input)).toEqual([genuine.input]);
  });

  it('asks again while the gateway has not read it yet, and stops asking once the handle is done', async () => {
    let asked = 0;
    const h = handle(undefined, async () => {
      if (asked++ < 2) throw new ToolgateError(ErrorCode.NotFound, 'not stored yet');
      return recordedApproval(genuine);
    });
    const seen = new Promise<ApprovalPendingEvent>((resolve) => h.on('approval:pending', resolve));
    h.feed(genuine);
    expect((await seen).key).toBe(genuine.approvalKey);
    expect(asked).toBe(3);

    const never = handle();
    never.feed(genuine);
    await tick(150);
    never.abandon('closing');
    const asks = never.asks.approvals;
    await tick(900);
    expect(never.asks.approvals).toBe(asks);
  });
});

describe('a dispatch handle’s tool:end', () => {
  it('is the heard settlement that carries the recorded outcome, never a forgery heard first', async () => {
    const h = handle(async () => ({ outcome: 'ok', result: { from: 'd1:settled' } }));
    const ends: ToolEndEvent[] = [];
    h.on('tool:end', (e) => ends.push(e));
    h.feed(settled('d1:settled:forged', 'error'));
    h.feed(settled('d1:settled', 'ok')); // the genuine one
    await h.result;
    expect(ends).toEqual([
      expect.objectContaining({
        type: 'tool:end',
        toolName: 'echo',
        outcome: 'ok',
        toolCallId: 'c1',
      }),
    ]);
    expect(h.asks.done).toBe(1);
  });

  it('is the genuine settlement when a forgery reusing its id was heard first', async () => {
    const h = handle(async () => ({ outcome: 'ok', result: { from: 'd1:settled' } }));
    const ends: ToolEndEvent[] = [];
    h.on('tool:end', (e) => ends.push(e));
    h.feed({ ...settled('d1:settled', 'error') });
    h.feed(settled('d1:settled', 'ok'));
    await h.result;
    expect(ends.map((e) => e.outcome)).toEqual(['ok']);
  });

  it('survives a flood of forgeries after the genuine settlement, and one with no canonical form', async () => {
    const h = handle(async () => ({ outcome: 'ok', result: { from: 'd1:settled' } }));
    const ends: ToolEndEvent[] = [];
    h.on('tool:end', (e) => ends.push(e));
    h.feed(settled('d1:settled', 'ok'));
    for (let i = 0; i < 64; i++) h.feed(settled(`d1:forged:${i}`, 'error'));
    let deep: unknown = 0;
    for (let i = 0; i < 250; i++) deep = [deep];
    expect(() => h.feed({ ...settled('d1:deep', 'ok'), result: deep })).not.toThrow();
    await expect(h.result).resolves.toEqual({ outcome: 'ok', result: { from: 'd1:settled' } });
    expect(ends.map((e) => e.outcome)).toEqual(['ok']);
  });

  it('is surfaced when the settlement is heard after the recorded outcome came, and the handle lets go after a while without it', async () => {
    const late = handle();
    late.recorded({ outcome: 'ok', result: { from: 'd1:settled' } });
    const ends: ToolEndEvent[] = [];
    late.on('tool:end', (e) => ends.push(e));
    late.feed(settled('d1:forged', 'error')); // heard first: finishes the handle, surfaces nothing
    await expect(late.result).resolves.toEqual({ outcome: 'ok', result: { from: 'd1:settled' } });
    expect({ ends: ends.length, done: late.asks.done }).toEqual({ ends: 0, done: 0 });
    late.feed(settled('d1:settled', 'ok'));
    expect({ ends: ends.map((e) => e.outcome), done: late.asks.done }).toEqual({
      ends: ['ok'],
      done: 1,
    });

    jest.useFakeTimers();
    try {
      const never = handle();
      never.recorded({ outcome: 'ok', result: 1 });
      never.feed(settled('d1:forged', 'error'));
      jest.advanceTimersByTime(1_999);
      expect(never.asks.done).toBe(0);
      jest.advanceTimersByTime(1);
      expect(never.asks.done).toBe(1);
    } finally {
      jest.useRealTimers();
    }
  });
});
