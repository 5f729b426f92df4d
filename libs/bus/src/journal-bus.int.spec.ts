import { jetstream } from '@nats-io/jetstream';
import { journalEvent, type RequestedEvent } from '@toolgate/contracts';
import {
  eventually,
  useTestNats,
  type TestNats,
  testJournalKeys,
  signedHeaders,
} from '@toolgate/testing';
import {
  ensureConsumer,
  ensureJournalStreams,
  JournalPublisher,
  runJournalConsumer,
  type BatchEntry,
  type ConsumerSpec,
  type PoisonReport,
} from './index';

const HASH = 'a'.repeat(64);

function requested(dispatchId: string, id = `${dispatchId}:requested`): RequestedEvent {
  return journalEvent({
    type: 'requested',
    id,
    tenant: 'acme',
    runId: 'run1',
    dispatchId,
    at: '2026-11-30T00:00:00.000Z',
    causationId: null,
    callId: 'call-1',
    tool: { name: 'noop', contractHash: HASH, needsApproval: false, executor: 'inprocess' },
    input: { n: 1 },
    agent: { agentType: 'tester' },
    isolation: 'none',
    submittedBy: 'tester',
  });
}

/**
 * Ensures the durable consumer `spec` describes on `t`'s journal and runs the loop on it, with
 * `loop` for its handler and hooks. Resolves once the loop is pulling.
 */
async function startConsumer(
  t: TestNats,
  spec: ConsumerSpec,
  loop: Omit<
    Parameters<typeof runJournalConsumer>[0],
    'js' | 'subjects' | 'role' | 'consumer' | 'keys'
  >,
) {
  const name = await ensureConsumer(t.jsm, t.subjects, spec);
  const running = runJournalConsumer({
    js: jetstream(t.nc),
    subjects: t.subjects,
    role: spec.role,
    consumer: name,
    keys: testJournalKeys(),
    ...loop,
  });
  await running.ready;
  return { running, name };
}

describe('journal bus on a real JetStream server', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('bus');
    await ensureJournalStreams(t.jsm, t.subjects);
    await ensureJournalStreams(t.jsm, t.subjects); // idempotent
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(() => t.cleanup());

  it('changes an existing stream’s settings only for the caller that manages the streams', async () => {
    const window = async () =>
      (await t.jsm.streams.info(t.subjects.journal.stream)).config.duplicate_window;
    const before = await window();
    // A service that only uses the streams (its NATS user may not update them) leaves them alone.
    await ensureJournalStreams(t.jsm, t.subjects, { duplicateWindowMs: 30_000 });
    expect(await window()).toBe(before);
    // The journal service, which owns them, brings them up to date.
    await ensureJournalStreams(t.jsm, t.subjects, { duplicateWindowMs: 30_000, manage: true });
    expect(await window()).toBe(30_000 * 1e6);
    await ensureJournalStreams(t.jsm, t.subjects, { manage: true });
    expect(await window()).toBe(before);
  });

  it('lets a once-per-dispatch transition happen once and dedupes a retried publish', async () => {
    const first = await publisher.append(requested('d1'));
    expect(first).toMatchObject({ appended: true, duplicate: false });
    const retried = await publisher.append(requested('d1'));
    expect(retried).toMatchObject({ appended: true, duplicate: true, seq: first.seq });
    const second = await publisher.append(requested('d1', 'another-id'));
    expect(second).toEqual({ appended: false });
    const last = await publisher.last('acme', 'run1', 'd1', 'requested');
    expect(last?.seq).toBe(first.seq);
    expect(last?.event.callId).toBe('call-1');
    expect(await publisher.last('acme', 'run1', 'nope', 'requested')).toBeNull();
  });

  it("reads a once-per-dispatch type from the leader alone when told to: no replica's read first", async () => {
    await publisher.append(requested('d-leader'));
    const subject = t.subjects.journal.event('acme', 'run1', 'd-leader', 'requested');
    const missing = t.subjects.journal.event('acme', 'run1', 'd-none', 'requested');
    const stream = t.subjects.journal.stream;
    // Every read of a subject's last message, whichever way it is asked (on this one-replica
    // stream the leader's reads are direct gets too: see `leader-reads-single.int.spec.ts`).
    const reads: string[] = [];
    const subs = [
      t.nc.subscribe(`$JS.API.DIRECT.GET.${stream}.>`, {
        callback: (_err, msg) =>
          void reads.push(msg.subject.slice(`$JS.API.DIRECT.GET.${stream}.`.length)),
      }),
      t.nc.subscribe(`$JS.API.STREAM.MSG.GET.${stream}`, {
        callback: (_err, msg) => void reads.push(msg.json<{ last_by_subj: string }>().last_by_subj),
      }),
    ];
    await t.nc.flush();
    try {
      const found = await publisher.last('acme', 'run1', 'd-leader', 'requested', {
        from: 'leader',
      });
      expect(found?.event.dispatchId).toBe('d-leader');
      expect(
        await publisher.last('acme', 'run1', 'd-none', 'requested', { from: 'leader' }),
      ).toBeNull();
      // By default a miss on a replica is confirmed with the leader: two reads.
      expect(await publisher.last('acme', 'run1', 'd-none', 'requested')).toBeNull();
      await t.nc.flush();
      expect(reads).toEqual([subject, missing, missing, missing]);
    } finally {
      subs.forEach((sub) => sub.unsubscribe());
    }
  });

  it('appends an event only where its subject last holds the expected sequence (compare-and-set)', async () => {
    const started = (attempt: number) =>
      journalEvent({
        type: 'started',
        id: `cas:started:${attempt}`,
        tenant: 'acme',
        runId: 'run1',
        dispatchId: 'cas',
        at: '2026-11-30T00:00:00.000Z',
        causationId: 'cas:decided',
        attempt,
        toolName: 'noop',
        executor: 'inprocess',
      });
    const first = await publisher.append(started(1), { lastSubjectSequence: 0 });
    expect(first.appended).toBe(true);
    // Two racing takeovers of the first claim: one wins.
    const racing = await Promise.all([
      publisher.append(started(2), { lastSubjectSequence: first.seq! }),
      publisher.append(started(3), { lastSubjectSequence: first.seq! }),
    ]);
    expect(racing.filter((r) => r.appended)).toHaveLength(1);
    expect(await publisher.append(started(4), { lastSubjectSequence: 0 })).toEqual({
      appended: false,
    });
    const last = await publisher.last('acme', 'run1', 'cas', 'started');
    const winner = racing.find((r) => r.appended)!;
    expect(last?.seq).toBe(winner.seq);
    expect(last?.storedAt.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await publisher.lastWithHead('acme', 'run1', 'cas', 'started')).toEqual({
      stored: last,
      head: { seq: winner.seq, storedAt: last?.storedAt, signed: true },
    });
    // Unreadable, its position is still known: a claim can supersede it.
    const garbage = await jetstream(t.nc).publish(
      t.subjects.journal.event('acme', 'run1', 'cas', 'started'),
      'not an event',
    );
    expect(await publisher.last('acme', 'run1', 'cas', 'started')).toBeNull();
    const unreadable = await publisher.lastWithHead('acme', 'run1', 'cas', 'started');
    expect(unreadable.stored).toBeNull();
    expect(unreadable.head?.seq).toBe(garbage.seq);
    expect(await publisher.lastWithHead('acme', 'run1', 'nope', 'started')).toEqual({
      stored: null,
      head: null,
    });
  });

  it('lets exactly one of 20 racing writers win', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => publisher.append(requested('race', `race-${i}`))),
    );
    expect(results.filter((r) => r.appended)).toHaveLength(1);
  });

  it('acks handled events, redelivers failures and dead-letters a poison message once', async () => {
    const spec = {
      role: 'executor' as const,
      eventType: 'requested',
      maxDeliver: 3,
      ackWaitMs: 5000,
    };
    await ensureConsumer(t.jsm, t.subjects, spec); // startConsumer ensures it again: idempotent
    const seen: string[] = [];
    const attempts = new Map<string, number>();
    const poisoned: PoisonReport[] = [];
    const { running, name } = await startConsumer(t, spec, {
      backoffMs: [10, 20],
      async handle(event, delivery) {
        attempts.set(event.dispatchId, delivery.deliveryCount);
        if (event.dispatchId.startsWith('poison')) throw new Error('cannot handle');
        if (event.dispatchId === 'flaky' && delivery.deliveryCount === 1)
          throw new Error('transient');
        seen.push(event.dispatchId);
      },
      async onPoison(report) {
        poisoned.push(report);
      },
    });
    await publisher.append(requested('ok1'));
    await publisher.append(requested('flaky'));
    await publisher.append(requested('poison1'));
    const garbage = t.subjects.journal.event('acme', 'run1', 'garbage', 'requested');
    // Signed by its producer and still not an event: a poison message, not a forgery.
    await jetstream(t.nc).publish(garbage, 'not json', {
      headers: signedHeaders(garbage, 'not json'),
    });

    await eventually(() => (poisoned.length === 2 && seen.includes('flaky') ? true : undefined), {
      what: 'poison + retry',
    });
    expect(attempts.get('flaky')).toBe(2);
    expect(attempts.get('poison1')).toBe(3);
    expect(poisoned.map((p) => p.event?.dispatchId ?? null).sort()).toEqual(
      [null, 'poison1'].sort(),
    );
    expect(poisoned.every((p) => p.error.code === 'poison-message')).toBe(true);
    await running.stop();

    const info = await t.jsm.streams.info(t.subjects.deadLetter.stream);
    expect(info.state.messages).toBe(2);
    // Acks are applied by the server asynchronously; wait for it to settle, then nothing is left.
    const consumerInfo = await eventually(
      async () => {
        const ci = await t.jsm.consumers.info(t.subjects.journal.stream, name);
        return ci.num_ack_pending === 0 ? ci : undefined;
      },
      { what: 'acks applied' },
    );
    expect(consumerInfo.num_pending).toBe(0);
    expect(consumerInfo.num_redelivered).toBe(0);
  });

  it('keeps pulling while a slow handler works through a batch longer than the pull expiry', async () => {
    const seen: string[] = [];
    const { running } = await startConsumer(
      t,
      { role: 'evaluator', eventType: 'requested', maxDeliver: 3, ackWaitMs: 30_000 },
      {
        async handle(event) {
          await new Promise((resolve) => setTimeout(resolve, 120));
          seen.push(event.dispatchId);
        },
      },
    );
    for (let i = 0; i < 25; i++) await publisher.append(requested(`slow${i}`));
    // 25 × 120 ms is well past the 1 s pull expiry and its heartbeat window.
    try {
      await eventually(
        () => (seen.filter((d) => d.startsWith('slow')).length === 25 ? true : undefined),
        {
          timeoutMs: 20_000,
          what: 'every slow event handled',
        },
      );
    } finally {
      await running.stop();
    }
    expect(seen.filter((d) => d.startsWith('slow'))).toEqual(
      Array.from({ length: 25 }, (_, i) => `slow${i}`),
    );
  });

  it('hands runs of events to a batch handler in stream order and isolates a failing event', async () => {
    const applied: number[] = [];
    const batchSizes: number[] = [];
    const poisoned: PoisonReport[] = [];
    const decided = (d: string) =>
      journalEvent({
        type: 'decided',
        id: `${d}:decided`,
        tenant: 'acme',
        runId: 'run1',
        dispatchId: d,
        at: '2026-11-30T00:00:00.000Z',
        causationId: null,
        verdict: 'allow',
        decidedBy: 'default',
        policyRevision: 0,
        inputDigest: HASH,
        input: {},
        tool: { name: 'noop', contractHash: HASH, needsApproval: false, executor: 'inprocess' },
        agent: { agentType: 'tester' },
        isolation: 'none',
      });
    for (let i = 0; i < 60; i++) await publisher.append(decided(i === 30 ? 'bad' : `b${i}`));
    const apply = (dispatchId: string, seq: number) => {
      if (dispatchId === 'bad') throw new Error('cannot fold');
      applied.push(seq);
    };
    const { running } = await startConsumer(
      t,
      { role: 'journal', eventType: 'decided', maxDeliver: 2, ackWaitMs: 30_000 },
      {
        async handle(event, delivery) {
          apply(event.dispatchId, delivery.seq);
        },
        batch: {
          maxBatch: 32,
          async handleBatch(entries) {
            batchSizes.push(entries.length);
            // All or nothing, like a transaction.
            if (entries.some((e) => e.event.dispatchId === 'bad')) throw new Error('cannot fold');
            for (const e of entries) apply(e.event.dispatchId, e.seq);
          },
        },
        async onPoison(report) {
          poisoned.push(report);
        },
      },
    );
    try {
      await eventually(() => (applied.length === 59 && poisoned.length === 1 ? true : undefined), {
        timeoutMs: 20_000,
        what: '59 applied and one dead-lettered',
      });
    } finally {
      await running.stop();
    }
    // Stream order: apart from the fallback after the failed batch, sequences only grow.
    const outOfOrder = applied.filter((seq, i) => i > 0 && seq < applied[i - 1]!);
    expect(outOfOrder).toEqual([]);
    expect(Math.max(...batchSizes)).toBeGreaterThan(1);
    expect(poisoned[0]!.event?.dispatchId).toBe('bad');
  });
});

describe('a batch consumer that lingers', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeEach(async () => {
    t = await useTestNats('linger');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterEach(() => t.cleanup());

  /** A consumer of its own on `requested`, recording the size of each run it is handed. */
  async function consume(maxBatch: number, lingerMs: number, now?: () => number) {
    const runs: number[] = [];
    const { running, name } = await startConsumer(
      t,
      { role: 'journal', eventType: 'requested', maxDeliver: 3, ackWaitMs: 30_000 },
      {
        async handle() {
          runs.push(1);
        },
        batch: {
          maxBatch,
          lingerMs,
          ...(now ? { now } : {}),
          async handleBatch(entries: BatchEntry[]) {
            runs.push(entries.length);
          },
        },
      },
    );
    return { runs, running, name, handled: () => runs.reduce((a, b) => a + b, 0) };
  }

  it('folds events that arrive within the linger into one run', async () => {
    const c = await consume(100, 2000);
    try {
      // The appends go out together: one after another, a loaded machine's slow round trips could
      // outlast the linger and split the run.
      await Promise.all(Array.from({ length: 5 }, (_, i) => publisher.append(requested(`d${i}`))));
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

  it('folds a backlog without lingering: the linger counts from when the broker stored an event', async () => {
    for (let i = 0; i < 6; i++) await publisher.append(requested(`b${i}`));
    // Seen from two minutes on, the six were stored longer ago than the minute's linger.
    const c = await consume(4, 60_000, () => Date.now() + 120_000);
    try {
      await eventually(() => (c.handled() === 6 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the backlog handled long before the linger ends',
      });
      // Not held for a run: handed over as it came, never more than a run.
      expect(Math.max(...c.runs)).toBeLessThanOrEqual(4);
    } finally {
      await c.running.stop();
    }
  });

  it('a stop ends the linger: what was pulled is handled, then the stop returns', async () => {
    const c = await consume(100, 60_000);
    for (let i = 0; i < 3; i++) await publisher.append(requested(`s${i}`));
    const info = async () => t.jsm.consumers.info(t.subjects.journal.stream, c.name);
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

describe('a consumer whose dead-lettering fails', () => {
  let t: TestNats;

  beforeAll(async () => {
    t = await useTestNats('deadfail');
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(() => t.cleanup());

  it('reports the failure through onError, not the handler error it settled', async () => {
    const errors: unknown[] = [];
    const { running } = await startConsumer(
      t,
      { role: 'executor', eventType: 'requested', maxDeliver: 1 },
      {
        async handle() {
          throw new Error('cannot handle');
        },
        async onPoison() {
          throw new Error('settlement failed');
        },
        onError: (err) => errors.push(err),
      },
    );
    try {
      await new JournalPublisher(t.nc, t.subjects, testJournalKeys()).append(requested('d1'));
      await eventually(() => (errors.length ? true : undefined), {
        timeoutMs: 5000,
        what: 'the failed dead-lettering reported',
      });
    } finally {
      await running.stop();
    }
    expect(errors).toEqual([expect.objectContaining({ message: 'settlement failed' })]);
  });
});

describe('messages pulled for a replica never outlive their ack wait', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeEach(async () => {
    t = await useTestNats('prefetch');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterEach(() => t.cleanup());

  const spec = {
    role: 'executor' as const,
    eventType: 'requested',
    maxDeliver: 5,
    ackWaitMs: 1000,
  };

  it('two replicas with slow handlers handle each message once, with no redelivery', async () => {
    // Each handler takes 400 ms against a 1 s ack wait: a replica that pulled more messages than it
    // has free workers would hold the rest past their ack wait, and the other replica would get
    // them again.
    const handled: { dispatchId: string; deliveryCount: number }[] = [];
    const replica = (concurrency: number) =>
      startConsumer(t, spec, {
        concurrency,
        async handle(event, delivery) {
          handled.push({ dispatchId: event.dispatchId, deliveryCount: delivery.deliveryCount });
          await new Promise((resolve) => setTimeout(resolve, 400));
        },
      });
    const one = await replica(1);
    const four = await replica(4);
    try {
      for (let i = 0; i < 20; i++) await publisher.append(requested(`p${i}`));
      await eventually(
        async () => {
          const ci = await t.jsm.consumers.info(t.subjects.journal.stream, one.name);
          return ci.num_pending === 0 && ci.num_ack_pending === 0 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'every message acked' },
      );
    } finally {
      await Promise.all([one.running.stop(), four.running.stop()]);
    }
    expect(handled.map((h) => h.dispatchId).sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `p${i}`).sort(),
    );
    expect(handled.filter((h) => h.deliveryCount > 1)).toEqual([]);
  });

  it('keeps the queued tail of a batch alive while a slow batch is applied', async () => {
    // One replica pulls a batch's worth and applies it two at a time, 500 ms a run: its last
    // messages wait twice the 1 s ack wait for their turn, while a second replica's pull waits for anything
    // the broker would redeliver.
    const handed: string[] = [];
    const replica = () =>
      startConsumer(
        t,
        { ...spec, role: 'journal' },
        {
          // A run of one is handed to `handle`.
          async handle(event) {
            handed.push(event.dispatchId);
            await new Promise((resolve) => setTimeout(resolve, 500));
          },
          batch: {
            maxBatch: 2,
            async handleBatch(entries: BatchEntry[]) {
              handed.push(...entries.map((e) => e.event.dispatchId));
              await new Promise((resolve) => setTimeout(resolve, 500));
            },
          },
        },
      );
    const first = await replica();
    try {
      for (let i = 0; i < 10; i++) await publisher.append(requested(`b${i}`));
      // Everything pulled by the first replica before the second one asks.
      await eventually(
        async () => {
          const ci = await t.jsm.consumers.info(t.subjects.journal.stream, first.name);
          return ci.num_pending === 0 ? true : undefined;
        },
        { what: 'all ten pulled' },
      );
      const second = await replica();
      try {
        await eventually(
          async () => {
            const ci = await t.jsm.consumers.info(t.subjects.journal.stream, first.name);
            return ci.num_pending === 0 && ci.num_ack_pending === 0 ? true : undefined;
          },
          { timeoutMs: 20_000, what: 'every message acked' },
        );
      } finally {
        await second.running.stop();
      }
    } finally {
      await first.running.stop();
    }
    expect([...handed].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `b${i}`).sort());
  });
});

describe('a batch consumer folding in lanes', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('lanes');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(() => t.cleanup());

  const started = (dispatchId: string, attempt: number) =>
    journalEvent({
      type: 'started',
      id: `${dispatchId}:started:${attempt}`,
      tenant: 'acme',
      runId: 'run1',
      dispatchId,
      at: '2026-11-30T00:00:00.000Z',
      causationId: null,
      attempt,
      toolName: 'noop',
      executor: 'inprocess',
    });

  /** Watches the runs being applied for one that holds a dispatch another is applying. */
  const runsInFlight = () => {
    const applying = new Set<string>();
    const watch = {
      overlapping: 0,
      sideBySide: false,
      /** Marks a run's dispatches as being applied; the returned function marks them done. */
      enter(entries: readonly { event: { dispatchId: string } }[]): () => void {
        const mine = new Set(entries.map((e) => e.event.dispatchId));
        for (const k of mine) if (applying.has(k)) watch.overlapping++;
        for (const k of mine) applying.add(k);
        if (applying.size > mine.size) watch.sideBySide = true;
        return () => {
          for (const k of mine) applying.delete(k);
        };
      },
    };
    return watch;
  };

  it("applies every event once, each dispatch's in stream order, and the lanes side by side", async () => {
    // 12 dispatches with 6 events each, published interleaved (below).
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    const seen = new Map<string, number[]>();
    // Catches a dispatch split across two lanes' runs applied at once.
    const inFlight = runsInFlight();
    let applied = 0;
    const { running } = await startConsumer(
      t,
      { role: 'journal', eventType: '*', maxDeliver: 3, ackWaitMs: 30_000, maxAckPending: 1000 },
      {
        async handle(event, delivery) {
          seen.set(event.dispatchId, [...(seen.get(event.dispatchId) ?? []), delivery.seq]);
          applied++;
        },
        batch: {
          maxBatch: 8,
          // Long enough that every lane fills a batch before its linger ends (the appends of a
          // round go out together, below): full batches are applied side by side, never merged.
          lingerMs: 1000,
          lanes: 3,
          laneKey: t.subjects.journal.keyOf,
          async handleBatch(entries) {
            const done = inFlight.enter(entries);
            // Slow enough that the lanes' runs overlap in time.
            await new Promise((r) => setTimeout(r, 30));
            for (const e of entries)
              seen.set(e.event.dispatchId, [...(seen.get(e.event.dispatchId) ?? []), e.seq]);
            applied += entries.length;
            done();
          },
        },
      },
    );
    try {
      // Round by round, so each dispatch's events are stored in order; a round's 12 appends at
      // once, so a loaded machine's slow round trips do not outlast a lane's linger.
      for (let attempt = 1; attempt <= 6; attempt++)
        await Promise.all(keys.map((k) => publisher.append(started(k, attempt))));
      await eventually(() => (applied === 72 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'all 72 events applied',
      });
    } finally {
      await running.stop();
    }
    expect([...seen.keys()].sort()).toEqual([...keys].sort());
    for (const [k, seqs] of seen) {
      expect({ k, seqs }).toEqual({ k, seqs: [...seqs].sort((a, b) => a - b) });
      expect(new Set(seqs).size).toBe(6);
    }
    // A dispatch is never in two runs applied at once, and different lanes did run at once.
    expect(inFlight.overlapping).toBe(0);
    expect(inFlight.sideBySide).toBe(true);
  });

  it('under light load folds what every lane holds in one run, and holds those lanes until it is applied', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `light${i}`);
    const runs: { seq: number; dispatchId: string }[][] = [];
    const inFlight = runsInFlight();
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const { running } = await startConsumer(
      t,
      { role: 'journal', eventType: '*', maxDeliver: 3, ackWaitMs: 30_000, maxAckPending: 1000 },
      {
        async handle(event, delivery) {
          runs.push([{ seq: delivery.seq, dispatchId: event.dispatchId }]);
        },
        batch: {
          maxBatch: 50,
          lingerMs: 1000,
          lanes: 3,
          laneKey: t.subjects.journal.keyOf,
          async handleBatch(entries) {
            const done = inFlight.enter(entries);
            runs.push(entries.map((e) => ({ seq: e.seq, dispatchId: e.event.dispatchId })));
            // The first run is held open while the next events of the same dispatches come in.
            if (runs.length === 1) await gate;
            done();
          },
        },
      },
    );
    try {
      // Twelve dispatches over three lanes, each lane lingering for more (the appends at once, so
      // a loaded machine's slow round trips do not outlast the linger).
      await Promise.all(keys.map((k) => publisher.append(started(k, 1))));
      await eventually(() => (runs.length > 0 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the first run',
      });
      // One run, not one per lane: every lane's queue went into it, in stream order.
      expect(runs[0]!.map((e) => e.dispatchId).sort()).toEqual([...keys].sort());
      expect(runs[0]!.map((e) => e.seq)).toEqual(runs[0]!.map((e) => e.seq).sort((a, b) => a - b));
      // Their next events, while it is applied: past their linger, still no run may start, for
      // each of those dispatches is in the run being applied.
      await Promise.all(keys.map((k) => publisher.append(started(k, 2))));
      await new Promise((r) => setTimeout(r, 1500));
      expect(runs).toHaveLength(1);
      openGate();
      await eventually(() => (runs.flat().length === 24 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'all 24 events applied',
      });
    } finally {
      openGate();
      await running.stop();
    }
    expect(inFlight.overlapping).toBe(0);
    for (const k of keys) {
      const seqs = runs
        .flat()
        .filter((e) => e.dispatchId === k)
        .map((e) => e.seq);
      expect({ k, seqs }).toEqual({ k, seqs: [...seqs].sort((a, b) => a - b) });
    }
  });
});

describe('a message its handler hands back', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('handback');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(() => t.cleanup());

  it('is redelivered at once, not after its ack wait, and never dead-lettered on its last delivery', async () => {
    const deliveries: number[] = [];
    const poisoned: PoisonReport[] = [];
    const { running } = await startConsumer(
      t,
      // An ack wait far beyond the test's patience: a redelivery can only come from the hand-back.
      { role: 'executor', eventType: 'requested', maxDeliver: 2, ackWaitMs: 120_000 },
      {
        backoffMs: [60_000],
        async handle(_event, delivery) {
          deliveries.push(delivery.deliveryCount);
          delivery.handBack();
          // Failing after the hand-back changes nothing: the message is another replica's now.
          if (delivery.lastAttempt) throw new Error('stopping');
        },
        async onPoison(report) {
          poisoned.push(report);
        },
      },
    );
    try {
      await publisher.append(requested('handed-back'));
      await eventually(() => (deliveries.length === 2 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the redelivery',
      });
      expect(deliveries).toEqual([1, 2]);
    } finally {
      await running.stop();
    }
    expect(poisoned).toEqual([]);
    const dead = await t.jsm.streams.info(t.subjects.deadLetter.stream);
    expect(dead.state.messages).toBe(0);
  });
});
