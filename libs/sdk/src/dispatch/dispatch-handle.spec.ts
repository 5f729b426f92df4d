import { journalEvent, type SettledEvent } from '@toolgate/contracts';
import { DispatchHandleImpl } from './dispatch-handle';

function handle(): DispatchHandleImpl<unknown> {
  return new DispatchHandleImpl(
    'd1',
    'run1',
    'accepted',
    { callId: 'c1' },
    () => Promise.reject(new Error('not used')),
    () => undefined,
  );
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
  it('is the first settlement heard when nothing recorded is known', async () => {
    const h = handle();
    h.feed(settled('d1:settled:a', 'error'));
    h.feed(settled('d1:settled', 'ok'));
    await expect(h.result).resolves.toMatchObject({ outcome: 'error' });
  });

  it('is the recorded outcome the gateway answered, whatever settlement is heard first', async () => {
    const h = handle();
    h.recorded({ outcome: 'ok', result: { from: 'd1:settled' } });
    // The losing settlement of a race: refused by the stream, still heard on the run's subjects.
    h.feed(settled('d1:settled:a', 'error'));
    await expect(h.result).resolves.toEqual({ outcome: 'ok', result: { from: 'd1:settled' } });
  });
});
