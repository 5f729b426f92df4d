import type { Subscription } from '@nats-io/transport-node';
import { ensureJournalStreams, JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  parseJournalEvent,
  ToolgateError,
  type ResolvedEvent,
} from '@toolgate/contracts';
import { eventually, useTestNats, type TestNats } from '@toolgate/testing';
import { APPROVAL_KEY, suspendedEvent } from '../test/fixtures/suspended-event.fixture';
import { decideResolution } from './resolution-decider';
import { publishResolution } from './resolution-publisher';

function resolution(
  dispatchId: string,
  decision: string,
  by: string,
  attemptId: string,
): ResolvedEvent {
  return decideResolution(suspendedEvent({ dispatchId }), {
    decision,
    by,
    source: 'human',
    approvalKey: APPROVAL_KEY,
    at: new Date('2026-03-01T10:00:00.000Z'),
    attemptId,
  });
}

describe('publishResolution on a real JetStream stream', () => {
  let t: TestNats;
  let publisher: JournalPublisher;
  let announcements: Subscription;
  const announced: ResolvedEvent[] = [];

  beforeAll(async () => {
    t = await useTestNats('approvals');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects);
    announcements = t.nc.subscribe(t.subjects.approvals('acme', 'resolved'), {
      callback: (_err, msg) => {
        announced.push(msg.json<ResolvedEvent>());
      },
    });
    await t.nc.flush();
  });
  afterAll(async () => {
    announcements?.unsubscribe();
    await t?.cleanup();
  });

  it('the first resolution wins and is announced; the second gets already-resolved naming the winner', async () => {
    const first = resolution('d1', 'allow', 'user:bob', 'attempt-1');
    expect(await publishResolution(publisher, t.nc, t.subjects, first)).toEqual(first);

    const second = resolution('d1', 'deny', 'user:carol', 'attempt-2');
    const err = await publishResolution(publisher, t.nc, t.subjects, second).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ToolgateError);
    expect((err as ToolgateError).code).toBe(ErrorCode.AlreadyResolved);
    expect((err as ToolgateError).message).toBe('already resolved: allow');
    expect((err as ToolgateError).details).toEqual({
      decision: 'allow',
      by: 'user:bob',
      source: 'human',
      at: first.at,
      dispatchId: 'd1',
    });

    // The journal holds the winner only.
    const stored = await publisher.last('acme', 'run1', 'd1', 'resolved');
    expect(parseJournalEvent(stored?.event)).toEqual(first);

    // The winner, and only the winner, is announced on the tenant's approvals subject.
    await eventually(() => (announced.some((e) => e.dispatchId === 'd1') ? true : undefined), {
      what: 'the resolved announcement',
    });
    await t.nc.flush();
    expect(announced.filter((e) => e.dispatchId === 'd1')).toEqual([first]);
  });

  it('of racing resolutions exactly one wins and every loser names it', async () => {
    const attempts = Array.from({ length: 8 }, (_, i) =>
      resolution('d2', i % 2 ? 'allow' : 'deny', `user:r${i}`, `race-${i}`),
    );
    const results = await Promise.allSettled(
      attempts.map((r) => publishResolution(publisher, t.nc, t.subjects, r)),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    const winner = (won[0] as PromiseFulfilledResult<ResolvedEvent>).value;
    for (const lost of results.filter((r) => r.status === 'rejected')) {
      const reason = (lost as PromiseRejectedResult).reason as ToolgateError;
      expect(reason.code).toBe(ErrorCode.AlreadyResolved);
      expect(reason.details).toMatchObject({ decision: winner.decision, by: winner.by });
    }
  });
});
