import { ensureJournalStreams, JournalPublisher } from '@toolgate/bus';
import { ErrorCode } from '@toolgate/contracts';
import { reForger, testJournalKeys, useTestNats, type TestNats } from '@toolgate/testing';
import { at, dispatchFixture, sequenced } from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvent } from '../projection/apply-event';
import { ApprovalTimeoutSweeper } from './approval-timeout-sweeper';

/**
 * On an open broker, a client re-forges the `resolved` of one due approval every time the sweeper
 * looks at it (the sweeper behind a slow link loses each bounded attempt). The pass still resolves
 * the other due approvals, says it could not resolve that one, and a later pass resolves it.
 */
describe('the approval timeout sweep against forgeries', () => {
  let nats: TestNats;
  let t: JournalTestDb;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    nats = await useTestNats('sweepforged');
    await ensureJournalStreams(nats.jsm, nats.subjects);
    t = await useJournalDb('sweep-forged');
    publisher = new JournalPublisher(nats.nc, nats.subjects, testJournalKeys());
  });
  afterAll(async () => {
    publisher?.close();
    await t?.cleanup();
    await nats?.cleanup();
  });

  it('resolves the others in the same pass, reports the one kept out, and resolves it once the forger stops', async () => {
    // Two parked calls, both past their expiry; the forged one expires first, so it is swept first.
    const forged = dispatchFixture({ dispatchId: 'sweep-forged', runId: 'run-sweep' });
    const other = dispatchFixture({
      dispatchId: 'sweep-other',
      runId: 'run-sweep',
      input: { path: '/tmp/other' },
    });
    const events = [
      forged.requested(0),
      forged.decided(1, 'ask'),
      forged.suspended(1, 10, 'deny'),
      other.requested(2),
      other.decided(3, 'ask'),
      other.suspended(3, 20, 'deny'),
    ];
    for (const event of events) {
      const appended = await publisher.append(event);
      expect(appended.appended).toBe(true);
    }
    for (const entry of sequenced(events, nats.subjects.journal.stream))
      await applyEvent(t.db, entry);

    const forger = await reForger(
      nats,
      nats.subjects.journal.event('acme', 'run-sweep', 'sweep-forged', 'resolved'),
    );
    try {
      const slowNc = await forger.victim();
      const sweeper = new ApprovalTimeoutSweeper(
        t.db,
        slowNc,
        nats.subjects,
        new JournalPublisher(slowNc, nats.subjects, testJournalKeys()),
        () => new Date(at(100)),
      );
      await expect(sweeper.sweep()).rejects.toMatchObject({
        code: ErrorCode.Unavailable,
        details: { dispatchId: 'sweep-forged', retryable: true },
      });
      expect(
        (await publisher.last('acme', 'run-sweep', 'sweep-other', 'resolved'))?.event,
      ).toMatchObject({ decision: 'deny', source: 'timeout' });
      expect(await publisher.last('acme', 'run-sweep', 'sweep-forged', 'resolved')).toBeNull();
      forger.stop();
      // The projection has not folded the other's resolution here: a later pass finds it resolved.
      expect(await sweeper.sweep()).toBe(1);
      expect(
        (await publisher.last('acme', 'run-sweep', 'sweep-forged', 'resolved'))?.event,
      ).toMatchObject({ decision: 'deny', source: 'timeout', by: 'system:timeout' });
    } finally {
      await forger.close();
    }
  });
});
