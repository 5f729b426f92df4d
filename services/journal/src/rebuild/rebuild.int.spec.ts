import { AckPolicy, jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { ConsumerRole, type JournalEvent, parseJournalEvent } from '@toolgate/contracts';
import {
  eventually,
  useTestNats,
  type TestNats,
  testJournalKeys,
  signedHeaders,
  publishSigned,
} from '@toolgate/testing';
import { dispatchFixture, worktreeFixture } from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvent } from '../projection/apply-event';
import { getRun } from '../queries/run-queries';
import { compareProjections } from './compare-projections';
import { readJournal } from './read-journal';
import { rebuildProjection } from './rebuild-projection';

/** ~50 events: every dispatch path, two tenants, three runs, and a worktree. */
function journalOfSeveralDispatches(): JournalEvent[] {
  const allow = dispatchFixture({ dispatchId: 'allow1' });
  const allowRetried = dispatchFixture({ dispatchId: 'allow2', toolName: 'grep' });
  const deny = dispatchFixture({ dispatchId: 'deny1', toolName: 'shell' });
  const askAllow = dispatchFixture({ dispatchId: 'ask1', runId: 'run-2', toolName: 'write_file' });
  const askDeny = dispatchFixture({ dispatchId: 'ask2', runId: 'run-2', toolName: 'http_fetch' });
  const askTimeout = dispatchFixture({ dispatchId: 'ask3', runId: 'run-2' });
  const parked = dispatchFixture({ dispatchId: 'park1', runId: 'run-3', toolName: 'shell' });
  const parked2 = dispatchFixture({ dispatchId: 'park2', runId: 'run-3', toolName: 'write_file' });
  const globex = dispatchFixture({ tenant: 'globex', dispatchId: 'allow1' });
  const globexErr = dispatchFixture({
    tenant: 'globex',
    dispatchId: 'err1',
    toolName: 'http_fetch',
  });
  const tree = worktreeFixture({ worktreeId: 'wt1', runId: 'run-2' });
  return [
    allow.requested(0),
    allowRetried.requested(1),
    deny.requested(2),
    allow.decided(3, 'allow'),
    deny.decided(3, 'deny', 'shell is denied'),
    deny.settled(3, 'denied'),
    allowRetried.decided(4, 'allow'),
    allow.started(5),
    allowRetried.started(5, 1),
    allow.settled(6, 'ok', { result: { lines: ['a', 'b'] } }),
    askAllow.requested(10),
    askDeny.requested(10),
    askTimeout.requested(11),
    tree.acquired(11),
    askAllow.decided(12, 'ask'),
    askAllow.suspended(12, 600),
    askDeny.decided(12, 'ask'),
    askDeny.suspended(12, 600),
    askTimeout.decided(13, 'ask'),
    askTimeout.suspended(13, 60, 'deny'),
    allowRetried.started(20, 2),
    globex.requested(20),
    globex.decided(21, 'allow'),
    askAllow.resolved(30, 'allow'),
    askAllow.started(31),
    askDeny.resolved(32, 'deny', 'carol'),
    askDeny.settled(32, 'denied'),
    allowRetried.settled(33, 'ok', { attempt: 2, result: 7 }),
    globex.started(34),
    globex.settled(35, 'ok'),
    parked.requested(40),
    parked2.requested(40),
    parked.decided(41, 'ask'),
    parked.suspended(41, 86_400),
    parked2.decided(41, 'ask'),
    parked2.suspended(41, 86_400),
    askAllow.settled(42, 'ok', { result: 'written' }),
    tree.collected(43),
    globexErr.requested(44),
    globexErr.decided(44, 'allow'),
    globexErr.started(45),
    globexErr.settled(46, 'error'),
    askTimeout.resolved(73, 'deny', 'system:timeout', 'timeout'),
    askTimeout.settled(73, 'denied'),
    tree.disposed(80),
  ];
}

describe('rebuild from the JetStream journal', () => {
  let nats: TestNats;
  let js: JetStreamClient;
  let live: JournalTestDb;
  let rebuilt: JournalTestDb;

  beforeEach(async () => {
    nats = await useTestNats('journal');
    js = jetstream(nats.nc);
    await nats.jsm.streams.add({
      name: nats.subjects.journal.stream,
      subjects: [nats.subjects.journal.all],
    });
    live = await useJournalDb('live');
    rebuilt = await useJournalDb('rebuilt');
  });
  afterEach(async () => {
    await Promise.all([nats.cleanup(), live.cleanup(), rebuilt.cleanup()]);
  });

  it('the rebuilt projection equals the live projection row by row', async () => {
    const events = journalOfSeveralDispatches();
    expect(events.length).toBeGreaterThanOrEqual(45);

    // The live side: a durable pull consumer applying events as they are published. Every 7th
    // message fails its first delivery (nak), so it is applied after later ones; every 5th is
    // applied but its ack is lost (nak after apply), so it comes again and must be a duplicate.
    const stream = nats.subjects.journal.stream;
    const durable = nats.subjects.consumer(ConsumerRole.Journal);
    await nats.jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 5_000_000_000,
      max_deliver: 10,
    });
    const messages = await (await js.consumers.get(stream, durable)).consume({ max_messages: 16 });
    const outcomes = { applied: 0, duplicate: 0 };
    const skippedSeqs = new Set<number>();
    const settledSeqs = new Set<number>();
    const liveConsumer = (async () => {
      for await (const m of messages) {
        const event = parseJournalEvent(m.json());
        if (event === null) {
          skippedSeqs.add(m.seq);
          settledSeqs.add(m.seq);
          m.term('not a journal event');
          continue;
        }
        if (m.seq % 7 === 0 && m.info.deliveryCount === 1) {
          m.nak(50);
          continue;
        }
        const outcome = await applyEvent(live.db, { event, seq: m.seq, stream: m.info.stream });
        outcomes[outcome] += 1;
        if (m.seq % 5 === 0 && m.info.deliveryCount === 1) {
          m.nak(50);
          continue;
        }
        m.ack();
        settledSeqs.add(m.seq);
      }
    })();

    await publishSigned(js, nats.subjects, events.slice(0, 20));
    // Not an event: a rebuild skips and counts it, the live consumer terminates it.
    const junk = nats.subjects.journal.event('acme', 'run-1', 'junk', 'requested');
    await js.publish(junk, '{"not":"an event"}', {
      headers: signedHeaders(junk, '{"not":"an event"}'),
    });
    await publishSigned(js, nats.subjects, events.slice(20));
    // A publisher's retry of an event already in the stream is deduplicated by the broker.
    await publishSigned(js, nats.subjects, events.slice(0, 1));

    const total = events.length + 1;
    let liveFailure: unknown;
    liveConsumer.catch((err: unknown) => (liveFailure = err));
    await eventually(
      () => {
        if (liveFailure !== undefined) throw liveFailure;
        return settledSeqs.size === total ? true : undefined;
      },
      { what: 'the live consumer to settle every message' },
    );
    await messages.close();
    await liveConsumer;
    expect(outcomes.applied).toBe(events.length);
    expect(outcomes.duplicate).toBeGreaterThan(0);
    expect(skippedSeqs.size).toBe(1);

    const reader = readJournal(js, nats.subjects, { keys: testJournalKeys() });
    const result = await rebuildProjection(rebuilt.db, reader, { batchSize: 8 });
    expect(result).toEqual({ applied: events.length, duplicates: 0, lastSeq: total });
    expect(reader.stats).toEqual({ read: events.length, skipped: 1, untrusted: 0, lastSeq: total });

    expect(await compareProjections(live.db, rebuilt.db)).toEqual([]);
    // The comparison is over real content, not two empty projections.
    expect(await rebuilt.db.selectFrom('dispatches').select('dispatch_id').execute()).toHaveLength(
      10,
    );
    expect(await rebuilt.db.selectFrom('audit_log').select('seq').execute()).toHaveLength(
      events.length,
    );
    expect((await getRun(rebuilt.db, 'acme', 'run-3'))?.status).toBe('suspended');
    expect((await getRun(rebuilt.db, 'acme', 'run-2'))?.status).toBe('settled');

    // Rebuilding over a populated projection resets it first and arrives at the same rows.
    const again = await rebuildProjection(
      rebuilt.db,
      readJournal(js, nats.subjects, { keys: testJournalKeys() }),
    );
    expect(again.applied).toBe(events.length);
    expect(await compareProjections(live.db, rebuilt.db)).toEqual([]);
  });

  it('reads from a sequence, and an empty stream is an empty read', async () => {
    const empty = readJournal(js, nats.subjects, { keys: testJournalKeys() });
    const none: unknown[] = [];
    for await (const entry of empty) none.push(entry);
    expect(none).toEqual([]);

    const events = journalOfSeveralDispatches().slice(0, 10);
    await publishSigned(js, nats.subjects, events);
    const seqs: number[] = [];
    const types: string[] = [];
    for await (const { seq, event, stream } of readJournal(js, nats.subjects, {
      fromSeq: 7,
      keys: testJournalKeys(),
    })) {
      seqs.push(seq);
      types.push(event.type);
      expect(stream).toBe(nats.subjects.journal.stream);
    }
    expect(seqs).toEqual([7, 8, 9, 10]);
    expect(types).toEqual(events.slice(6).map((e) => e.type));

    // Catch-up: an incremental rebuild from where the projection stands applies only the rest.
    await rebuildProjection(
      live.db,
      readJournal(js, nats.subjects, { fromSeq: 1, keys: testJournalKeys() }),
    );
    await publishSigned(js, nats.subjects, journalOfSeveralDispatches().slice(10, 15));
    const catchUp = await rebuildProjection(
      live.db,
      readJournal(js, nats.subjects, { fromSeq: 11, keys: testJournalKeys() }),
      { reset: false },
    );
    expect(catchUp).toEqual({ applied: 5, duplicates: 0, lastSeq: 15 });
    // Replaying what is already applied changes nothing: every event is a duplicate.
    const replay = await rebuildProjection(
      live.db,
      readJournal(js, nats.subjects, { keys: testJournalKeys() }),
      {
        reset: false,
        batchSize: 4,
      },
    );
    expect(replay).toEqual({ applied: 0, duplicates: 15, lastSeq: 15 });
    expect(await readJournalCount(js, nats, 16)).toBe(0);
  });
});

async function readJournalCount(
  js: JetStreamClient,
  nats: TestNats,
  fromSeq: number,
): Promise<number> {
  let n = 0;
  for await (const _ of readJournal(js, nats.subjects, { fromSeq, keys: testJournalKeys() }))
    n += 1;
  return n;
}
