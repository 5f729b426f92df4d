import { jetstream, JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import {
  contractHash,
  dispatchKey,
  journalEvent,
  ONCE_PER_DISPATCH,
  parseJournalEvent,
  type RequestedEvent,
} from '@toolgate/contracts';
import { useTestNats, type TestNats } from './test-nats';

/** JetStream's "wrong last sequence" API error (Nats-Expected-Last-Subject-Sequence mismatch). */
const WRONG_LAST_SEQUENCE = 10071;

describe('the journal on a real JetStream stream', () => {
  let nats: TestNats;
  let js: JetStreamClient;

  beforeAll(async () => {
    nats = await useTestNats('contracts');
    js = jetstream(nats.nc);
    await nats.jsm.streams.add({
      name: nats.subjects.journal.stream,
      subjects: [nats.subjects.journal.all],
      allow_direct: true,
    });
  });

  afterAll(async () => {
    await nats?.cleanup();
  });

  const contract = {
    name: 'search_issues',
    description: 'Search the issue tracker and return the top matches.',
    parameters: { type: 'object', properties: { query: { type: 'string' } } },
  };
  const input = { query: 'flaky test' };
  const dispatchId = dispatchKey({
    tenant: 'acme',
    runId: 'run_1',
    callId: 'call_1',
    toolName: contract.name,
    contractHash: contractHash(contract),
    input,
  });

  const subjectOf = (event: RequestedEvent): string =>
    nats.subjects.journal.event(event.tenant, event.runId, event.dispatchId, event.type);

  function requested(id: string): RequestedEvent {
    return journalEvent({
      id,
      type: 'requested',
      tenant: 'acme',
      runId: 'run_1',
      dispatchId,
      at: '2025-01-02T03:04:05.000Z',
      causationId: null,
      callId: 'call_1',
      tool: {
        name: contract.name,
        contractHash: contractHash(contract),
        needsApproval: false,
        executor: 'inprocess',
      },
      input,
      agent: { agentType: 'operator' },
      isolation: 'none',
      submittedBy: 'user:alice',
    });
  }

  it('publishes a requested event, reads it back by last subject and parses it', async () => {
    const event = requested(`${dispatchId}.requested`);
    const subject = subjectOf(event);
    expect(ONCE_PER_DISPATCH.has(event.type)).toBe(true);

    const ack = await js.publish(subject, JSON.stringify(event), {
      msgID: event.id,
      expect: { lastSubjectSequence: 0 },
    });
    expect(ack.stream).toBe(nats.subjects.journal.stream);
    expect(ack.duplicate).toBe(false);

    const stored = await nats.jsm.direct.getMessage(nats.subjects.journal.stream, {
      last_by_subj: subject,
    });
    expect(stored).not.toBeNull();
    expect(stored!.subject).toBe(subject);
    expect(stored!.seq).toBe(ack.seq);
    const parsed = parseJournalEvent(stored!.json());
    expect(parsed).toEqual(event);

    // The same dispatch's events are found under the dispatch filter, and only there.
    const info = await nats.jsm.streams.info(nats.subjects.journal.stream, {
      subjects_filter: nats.subjects.journal.forKey('acme', 'run_1', dispatchId),
    });
    expect(info.state.subjects).toEqual({ [subject]: 1 });
  });

  it('a retried publish with the same Nats-Msg-Id is deduplicated', async () => {
    const event = requested(`${dispatchId}.requested`);
    const subject = subjectOf(event);
    const ack = await js.publish(subject, JSON.stringify(event), { msgID: event.id });
    expect(ack.duplicate).toBe(true);
  });

  it('the broker refuses a second requested for the same dispatch (expected last subject sequence 0)', async () => {
    const second = requested('a-different-event-id');
    const subject = subjectOf(second);
    const err = await js
      .publish(subject, JSON.stringify(second), {
        msgID: second.id,
        expect: { lastSubjectSequence: 0 },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect((err as JetStreamApiError).code).toBe(WRONG_LAST_SEQUENCE);

    // The first one is still the only requested event of the dispatch.
    const stored = await nats.jsm.direct.getMessage(nats.subjects.journal.stream, {
      last_by_subj: subject,
    });
    expect(parseJournalEvent(stored!.json())?.id).toBe(`${dispatchId}.requested`);
    const info = await nats.jsm.streams.info(nats.subjects.journal.stream);
    expect(info.state.messages).toBe(1);
  });
});
