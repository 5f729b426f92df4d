import { ensureJournalStreams, JournalPublisher } from '@toolgate/bus';
import { ConsumerRole, ErrorCode } from '@toolgate/contracts';
import { reForger, useTestNats, type TestNats, testJournalKeys } from '@toolgate/testing';
import { settlePoisonedDispatch } from './poison-settlement';

describe('settlePoisonedDispatch on a real stream', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('poison');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(() => t?.cleanup());

  const report = (subject: string, message = 'payload is not an event') => ({
    role: ConsumerRole.Executor,
    consumer: 'c1',
    subject,
    seq: 17,
    deliveryCount: 5,
    event: null,
    error: { code: ErrorCode.InvalidRequest, message },
  });

  it('settles a dispatch named only by the subject of an unparseable payload', async () => {
    await settlePoisonedDispatch(
      publisher,
      report(t.subjects.journal.event('acme', 'run9', 'd9', 'decided')),
    );
    const settled = await publisher.last('acme', 'run9', 'd9', 'settled');
    expect(settled?.event).toMatchObject({
      type: 'settled',
      id: 'd9:settled',
      tenant: 'acme',
      runId: 'run9',
      dispatchId: 'd9',
      causationId: null,
      toolName: 'unknown',
      outcome: 'error',
      error: {
        code: ErrorCode.PoisonMessage,
        message: 'payload is not an event',
        details: { consumer: 'c1', seq: 17 },
      },
      attempt: 5,
    });
  });

  it('leaves a dispatch that is already settled as it is', async () => {
    const subject = t.subjects.journal.event('acme', 'run9', 'd10', 'requested');
    await settlePoisonedDispatch(publisher, report(subject, 'first'));
    await settlePoisonedDispatch(publisher, report(subject, 'second'));
    const settled = await publisher.last('acme', 'run9', 'd10', 'settled');
    expect(settled?.event).toMatchObject({ error: { message: 'first' } });
  });

  it('does not settle worktree events (their key is a worktree, not a dispatch)', async () => {
    await settlePoisonedDispatch(
      publisher,
      report(t.subjects.journal.event('acme', 'run9', 'wt1', 'worktree-acquired')),
    );
    expect(await publisher.last('acme', 'run9', 'wt1', 'settled')).toBeNull();
  });

  it('throws while forgeries keep the settlement out (the message is not terminated), and settles once they stop', async () => {
    // The dead-lettering service behind a slow link, against a client that re-forges `settled`.
    const forger = await reForger(t, t.subjects.journal.event('acme', 'run9', 'd11', 'settled'));
    try {
      const slowNc = await forger.victim();
      const slow = new JournalPublisher(slowNc, t.subjects, testJournalKeys());
      const poisoned = report(t.subjects.journal.event('acme', 'run9', 'd11', 'decided'));
      await expect(settlePoisonedDispatch(slow, poisoned)).rejects.toMatchObject({
        code: ErrorCode.Unavailable,
        details: { retryable: true, dispatchId: 'd11' },
      });
      forger.stop();
      expect(await publisher.last('acme', 'run9', 'd11', 'settled')).toBeNull();
      await settlePoisonedDispatch(slow, poisoned);
      expect((await publisher.last('acme', 'run9', 'd11', 'settled'))?.event).toMatchObject({
        outcome: 'error',
        error: { code: ErrorCode.PoisonMessage },
      });
    } finally {
      await forger.close();
    }
  });
});
