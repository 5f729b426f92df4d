import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  createSubjects,
  journalEvent,
  type StartedEvent,
  type Subjects,
} from '@toolgate/contracts';
import {
  callEvents,
  signedHeaders,
  startNatsCluster,
  testKeys,
  uniqueName,
  type NatsCluster,
} from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';

/**
 * A compare-and-set append on a sequence above 0 (the executor's takeover of a claim) whose first
 * attempt was stored but whose ack was lost (a leader change, a commit slower than the attempt's
 * wait), then sent again with the same message id. A clustered nats-server 2.9 checks such an
 * expectation before it deduplicates, so the resend is answered "wrong last sequence" — which the
 * publisher took for a lost race: the executor held the claim and waited its whole lease for
 * itself. The lost attempt is the very bytes of the append, published first on the same subject.
 */
describe('a compare-and-set append resent after its first attempt was stored, on an R3 journal', () => {
  let cluster: NatsCluster;
  let subjects: Subjects;
  let nc: NatsConnection;
  let executor: JournalPublisher;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'casresend' });
    subjects = createSubjects(uniqueName('casresend'));
    await ensureJournalStreams(await cluster.jsm(), subjects, { replicas: 3 });
    nc = await cluster.connect('cas-resend');
    executor = new JournalPublisher(nc, subjects, testKeys('tool-executor'));
  }, 60_000);

  afterAll(async () => {
    executor?.close();
    await cluster?.cleanup();
  });

  /** A takeover claim of `dispatchId` by delivery `attempt`, as the executor writes it. */
  const claim = (dispatchId: string, attempt: number, nonce: string): StartedEvent => {
    const { decided } = callEvents({ dispatchId });
    return journalEvent<'started'>({
      type: 'started',
      id: `${dispatchId}:started:decided:${attempt}:${nonce}`,
      tenant: decided.tenant,
      runId: decided.runId,
      dispatchId,
      at: new Date().toISOString(),
      causationId: decided.id,
      attempt,
      toolName: decided.tool.name,
      executor: 'inprocess',
    });
  };

  /** Publishes `event`'s exact bytes as its append's first attempt would, expecting `after`. */
  const lostAttempt = async (event: StartedEvent, after: number): Promise<number> => {
    const subject = subjects.journal.event(event.tenant, event.runId, event.dispatchId, 'started');
    const data = Buffer.from(JSON.stringify(event));
    const ack = await jetstream(nc).publish(subject, data, {
      headers: signedHeaders(subject, data),
      msgID: event.id,
      expect: { lastSubjectSequence: after },
    });
    return ack.seq;
  };

  const startedCount = async (event: StartedEvent) => {
    const subject = subjects.journal.event(event.tenant, event.runId, event.dispatchId, 'started');
    const info = await (
      await cluster.jsm()
    ).streams.info(subjects.journal.stream, { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  };

  it('takes its own stored attempt for its append, and another claim for a lost race', async () => {
    const first = claim('d-resend', 1, 'aaaa');
    const held = await executor.append(first, { lastSubjectSequence: 0 });
    expect(held).toMatchObject({ appended: true });

    const takeover = claim('d-resend', 2, 'bbbb');
    const stored = await lostAttempt(takeover, held.seq!);
    expect(await executor.append(takeover, { lastSubjectSequence: held.seq! })).toEqual({
      appended: true,
      seq: stored,
      duplicate: false,
    });

    // Another delivery's takeover from the same claim, after this one landed: a race lost.
    const rival = claim('d-resend', 2, 'cccc');
    expect(await executor.append(rival, { lastSubjectSequence: held.seq! })).toEqual({
      appended: false,
    });
    expect(await startedCount(first)).toBe(2);
  });
});
