import {
  ErrorCode,
  journalEvent,
  ToolgateError,
  type DispatchOutcome,
  type SettledEvent,
} from '@toolgate/contracts';

const denied = { code: ErrorCode.Denied, message: 'refused' };
import { DispatchHandleImpl } from './dispatch-handle';

/** A handle whose asks for the recorded outcome are answered by `recorded` (and counted). */
function handle(recorded: () => Promise<DispatchOutcome | null> = async () => null) {
  const asks = { count: 0 };
  const h = new DispatchHandleImpl(
    'd1',
    'run1',
    'accepted',
    { callId: 'c1' },
    () => Promise.reject(new Error('not used')),
    () => undefined,
    () => {
      asks.count++;
      return recorded();
    },
  );
  return Object.assign(h, { asks });
}

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
