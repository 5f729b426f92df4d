import { jetstream } from '@nats-io/jetstream';
import { journalEvent, type RequestedEvent } from '@toolgate/contracts';
import { eventually, useTestNats, type TestNats } from '@toolgate/testing';
import {
  consumerName,
  ensureConsumer,
  ensureJournalStreams,
  JournalPublisher,
  runJournalConsumer,
  type BatchEntry,
} from './index';

const HASH = 'b'.repeat(64);

const requested = (dispatchId: string): RequestedEvent =>
  journalEvent({
    type: 'requested',
    id: `${dispatchId}:requested`,
    tenant: 'acme',
    runId: 'run1',
    dispatchId,
    at: '2026-11-30T00:00:00.000Z',
    causationId: null,
    callId: 'call-1',
    tool: { name: 'noop', contractHash: HASH, needsApproval: false, executor: 'inprocess' },
    input: {},
    agent: { agentType: 'tester' },
    isolation: 'none',
    submittedBy: 'tester',
  });

describe('a batch consumer that lingers', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeEach(async () => {
    t = await useTestNats('linger');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects);
  });
  afterEach(() => t.cleanup());

  /** A consumer of its own on `requested`, recording the size of each run it is handed. */
  async function consume(maxBatch: number, lingerMs: number) {
    const spec = {
      role: 'journal' as const,
      eventType: 'requested',
      maxDeliver: 3,
      ackWaitMs: 30_000,
    };
    await ensureConsumer(t.jsm, t.subjects, spec);
    const runs: number[] = [];
    const running = runJournalConsumer({
      js: jetstream(t.nc),
      subjects: t.subjects,
      role: 'journal',
      consumer: consumerName(t.subjects, spec),
      maxDeliver: 3,
      async handle() {
        runs.push(1);
      },
      batch: {
        maxBatch,
        lingerMs,
        async handleBatch(entries: BatchEntry[]) {
          runs.push(entries.length);
        },
      },
    });
    await running.ready;
    return { runs, running, handled: () => runs.reduce((a, b) => a + b, 0) };
  }

  it('folds events that arrive within the linger into one run', async () => {
    const c = await consume(100, 2000);
    try {
      for (let i = 0; i < 5; i++) await publisher.append(requested(`d${i}`));
      await eventually(() => (c.handled() === 5 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'five events handled',
      });
      expect(c.runs).toEqual([5]);
    } finally {
      await c.running.stop();
    }
  });

  it('hands a full run over at once instead of lingering', async () => {
    const c = await consume(4, 60_000);
    try {
      for (let i = 0; i < 8; i++) await publisher.append(requested(`f${i}`));
      await eventually(() => (c.handled() === 8 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'two full runs handled long before the linger ends',
      });
      expect(c.runs).toEqual([4, 4]);
    } finally {
      await c.running.stop();
    }
  });

  it('a stop ends the linger: what was pulled is handled, then the stop returns', async () => {
    const c = await consume(100, 60_000);
    for (let i = 0; i < 3; i++) await publisher.append(requested(`s${i}`));
    const info = async () =>
      t.jsm.consumers.info(
        t.subjects.journal.stream,
        consumerName(t.subjects, { role: 'journal', eventType: 'requested' }),
      );
    // Pulled (delivered, not yet acked) but held back by the linger.
    await eventually(async () => ((await info()).num_ack_pending === 3 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'three events pulled and lingering',
    });
    expect(c.handled()).toBe(0);
    await c.running.stop();
    expect(c.runs).toEqual([3]);
    await eventually(async () => ((await info()).num_ack_pending === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the three events acked',
    });
  });
});
