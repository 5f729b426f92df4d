import fc from 'fast-check';
import { JournalPublisher } from '@toolgate/bus';
import { journalEvent, type SettledEvent } from '@toolgate/contracts';
import { Metrics } from '@toolgate/service-kit';
import {
  BROKER_SHAPES,
  eventually,
  startTestBroker,
  testJournalKeys,
  useTestNats,
  type TestBroker,
  type TestNats,
} from '@toolgate/testing';
import {
  crash,
  dispatch,
  journalCounts,
  closeRegistry,
  registerRemoteTool,
  serveCountingTool,
  sleep,
  startReplica,
  TENANT,
  type Replica,
} from '../../test/executor-harness';

/**
 * The settlements of `ids`, once every one is recorded. Reads only the ones not found yet (a
 * settlement is recorded once per dispatch and never replaced), when a message lands on one of the
 * run's `settled` subjects — again shortly while one seen there is not read back yet (the stream
 * may store it a moment after subscribers get it), and once a second besides.
 */
async function settledAll(
  t: TestNats,
  publisher: JournalPublisher,
  run: string,
  ids: string[],
  timeoutMs = 30_000,
) {
  const found = new Map<string, SettledEvent>();
  const seen = new Set<string>();
  let wake: () => void = () => undefined;
  // Subscribed before the first read: a settlement recorded after it wakes a later one.
  const sub = t.nc.subscribe(t.subjects.journal.ofTypeIn('settled', TENANT, run), {
    callback: (_err, msg) => {
      seen.add(msg.subject.split('.').at(-2)!);
      wake();
    },
  });
  const deadline = Date.now() + timeoutMs;
  try {
    await t.nc.flush();
    for (;;) {
      const missing = ids.filter((id) => !found.has(id));
      const read = await Promise.all(
        missing.map((id) => publisher.last(TENANT, run, id, 'settled')),
      );
      read.forEach((s, i) => s && found.set(missing[i]!, s.event));
      if (found.size === ids.length) return ids.map((id) => found.get(id)!);
      if (Date.now() > deadline)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${ids.length} dispatches settled`,
        );
      const storing = ids.some((id) => seen.has(id) && !found.has(id));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, storing ? 25 : 1000);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = () => undefined;
    }
  } finally {
    sub.unsubscribe();
  }
}

/** Replicas serve remote tools only here: no sandbox (its probe and file helpers) to start. */
const REMOTE_ONLY = { EXECUTOR_SANDBOX: 'off' };

/**
 * At most once per settlement, and at most once without a crash: executor replicas share one
 * durable consumer, their ack wait (1 s) is far shorter than the tool (seconds), and a worker counts
 * every execution and whether it began after its dispatch was settled.
 */
describe('a call runs once: executor replicas against a slow remote tool', () => {
  let t: TestNats;
  let publisher: JournalPublisher;
  let n = 0;
  const runId = () => `run${++n}`;

  beforeAll(async () => {
    t = await useTestNats('once');
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(async () => {
    await closeRegistry(t);
    await t.cleanup();
  });

  /** Runs `count` slow calls over replicas of the given concurrencies; checks each ran once. */
  async function scenario(concurrencies: number[], count: number, delayMs: number) {
    const tool = `slow${n + 1}`;
    const run = runId();
    const worker = serveCountingTool(t, publisher, tool, async () => {
      await sleep(delayMs);
      return { ok: true, result: 'done' };
    });
    const replicas: Replica[] = [];
    try {
      for (const concurrency of concurrencies)
        replicas.push(
          await startReplica(t, { ...REMOTE_ONLY, EXECUTOR_CONCURRENCY: String(concurrency) }),
        );
      // Dispatch ids are unique, as content keys are: event ids (and their dedupe) derive from them.
      const ids = Array.from({ length: count }, (_, i) => `${run}d${i}`);
      const ref = await registerRemoteTool(t, tool);
      for (const id of ids) await dispatch(publisher, run, id, ref, { id });
      const settled = await settledAll(t, publisher, run, ids, 60_000);
      expect(settled.map((s) => s.outcome)).toEqual(ids.map(() => 'ok'));
      expect(worker.total()).toBe(count);
      expect([...worker.executions.values()].every((e) => e === 1)).toBe(true);
      expect(worker.afterSettlement).toEqual([]);
      for (const id of ids) {
        const counts = await journalCounts(t, run, id);
        expect([id, counts.started, counts.settled]).toEqual([id, 1, 1]);
      }
    } finally {
      worker.stop();
      await Promise.all(replicas.map((r) => r.stop()));
    }
  }

  it('concurrency 1 and 16: 16 calls of 2.5 s run 16 times, none after settlement', async () => {
    await scenario([1, 16], 16, 2500);
  }, 90_000);

  it('concurrency 4 and 4: 16 calls of 2.5 s run 16 times, none after settlement', async () => {
    await scenario([4, 4], 16, 2500);
  }, 90_000);

  it('holds for any number of replicas, concurrency and tool delay (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 0, max: 1800 }),
        async (concurrencies, count, delayMs) => scenario(concurrencies, count, delayMs),
      ),
      { numRuns: 5 },
    );
  }, 240_000);
});

/**
 * The claims behind "at most once without a crash", on both broker shapes: each rests on reads
 * that decide (settled or not, the current claim and where the subject's last message sits) and a
 * compare-and-set on `started`, which a cluster answers from a leader while followers may lag.
 */
describe.each(BROKER_SHAPES)('a call runs once: claims on $shape', (shape) => {
  let broker: TestBroker;
  let t: TestNats;
  let publisher: JournalPublisher;
  let n = 0;
  const runId = () => `run${++n}`;

  beforeAll(async () => {
    broker = await startTestBroker(shape, 'claims');
    t = await useTestNats('claims', { servers: broker.servers });
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  }, 60_000);
  afterAll(async () => {
    await closeRegistry(t);
    await t?.cleanup();
    await broker?.cleanup();
  }, 60_000);

  it('a replica that dies mid-call: the call runs again once on another, and settles once', async () => {
    const run = runId();
    // The first execution never answers: its replica dies while it waits.
    const worker = serveCountingTool(t, publisher, 'hangs_once', (_input, execution) =>
      execution === 1 ? undefined : { ok: true, result: { execution } },
    );
    const doomed = await startReplica(t, { ...REMOTE_ONLY, ...broker.env });
    let survivor: Replica | undefined;
    try {
      // The shape is the one named: the replica made the journal with the broker's replicas.
      const journal = await t.jsm.streams.info(t.subjects.journal.stream);
      expect(journal.config.num_replicas).toBe(shape.replicas);
      await dispatch(publisher, run, 'k1', await registerRemoteTool(t, 'hangs_once'), {});
      await eventually(() => (worker.total() === 1 ? true : undefined), { what: 'first run' });
      await crash(doomed);
      survivor = await startReplica(t, { ...REMOTE_ONLY, ...broker.env });
      const [settled] = await settledAll(t, publisher, run, ['k1']);
      expect(settled).toMatchObject({ outcome: 'ok', result: { execution: 2 }, attempt: 2 });
      expect(worker.total()).toBe(2);
      expect(worker.afterSettlement).toEqual([]);
      const counts = await journalCounts(t, run, 'k1');
      expect(counts).toMatchObject({ started: 2, settled: 1 });
    } finally {
      worker.stop();
      await survivor?.stop();
    }
  }, 60_000);

  describe('a delivery that finds another holder’s live claim', () => {
    /** A `started` as another holder's claim would be: of another decision, or unreadable. */
    async function claimHeldElsewhere(run: string, id: string) {
      const appended = await publisher.append(
        journalEvent({
          type: 'started',
          id: `${id}:started:elsewhere`,
          tenant: TENANT,
          runId: run,
          dispatchId: id,
          at: new Date().toISOString(),
          causationId: `${id}:resolved`,
          attempt: 1,
          toolName: 'quick',
          executor: 'remote',
        }),
        { lastSubjectSequence: 0 },
      );
      expect(appended.appended).toBe(true);
    }

    const claims = async (replica: Replica, outcome: string) => {
      const text = await replica.app.get(Metrics).render();
      const line = text
        .split('\n')
        .find((l) => l.startsWith(`toolgate_executor_claims_total{outcome="${outcome}"}`));
      return line ? Number(line.split(' ').pop()) : 0;
    };

    it('waits, keeps the message, and never runs the call once the holder settles', async () => {
      const run = runId();
      const worker = serveCountingTool(t, publisher, 'quick', () => ({ ok: true, result: 1 }));
      const replica = await startReplica(t, { ...REMOTE_ONLY, ...broker.env });
      try {
        await claimHeldElsewhere(run, 'w1');
        await dispatch(publisher, run, 'w1', await registerRemoteTool(t, 'quick', 60_000), {});
        await eventually(async () => ((await claims(replica, 'waited')) === 1 ? true : undefined), {
          what: 'the delivery waiting on the claim',
        });
        // The holder settles.
        await publisher.append(
          journalEvent({
            type: 'settled',
            id: 'w1:settled',
            tenant: TENANT,
            runId: run,
            dispatchId: 'w1',
            at: new Date().toISOString(),
            causationId: 'w1:resolved',
            toolName: 'quick',
            outcome: 'ok',
            result: 'by the holder',
            durationMs: 1,
            attempt: 1,
          }),
        );
        await eventually(
          async () => ((await claims(replica, 'settled')) === 1 ? true : undefined),
          { what: 'the waiting delivery seeing the settlement' },
        );
        // Its message acknowledged (the ack reaches the broker a moment after the claim is counted).
        await eventually(
          async () => {
            const consumer = await t.jsm.consumers.info(
              t.subjects.journal.stream,
              `${t.subjects.consumer('executor')}-decided`,
            );
            return consumer.num_ack_pending + consumer.num_pending === 0 ? true : undefined;
          },
          { what: 'the waiting delivery acknowledged' },
        );
        expect(worker.total()).toBe(0);
        expect(await journalCounts(t, run, 'w1')).toMatchObject({ started: 1, settled: 1 });
      } finally {
        worker.stop();
        await replica.stop();
      }
    }, 30_000);

    it('takes the claim over once its lease has run out, and runs the call once', async () => {
      const run = runId();
      const worker = serveCountingTool(t, publisher, 'quick2', () => ({ ok: true, result: 2 }));
      const replica = await startReplica(t, { ...REMOTE_ONLY, ...broker.env });
      try {
        await claimHeldElsewhere(run, 'w2');
        // Lease: the tool's 3 s deadline plus one ack wait. The deadline also bounds the run after
        // the takeover (its claim and the worker's answer), which must succeed: 500 ms was short
        // for that on a loaded machine.
        await dispatch(publisher, run, 'w2', await registerRemoteTool(t, 'quick2', 3_000), {});
        const [settled] = await settledAll(t, publisher, run, ['w2']);
        expect(settled).toMatchObject({ outcome: 'ok', result: 2 });
        expect(await claims(replica, 'took-over')).toBe(1);
        expect(worker.total()).toBe(1);
        expect(await journalCounts(t, run, 'w2')).toMatchObject({ started: 2, settled: 1 });
      } finally {
        worker.stop();
        await replica.stop();
      }
    }, 30_000);

    it('ignores a started nobody signed: the call runs at once, not after a lease', async () => {
      const run = runId();
      const worker = serveCountingTool(t, publisher, 'quick3', () => ({ ok: true, result: 3 }));
      const replica = await startReplica(t, { ...REMOTE_ONLY, ...broker.env });
      try {
        // Any client on an open broker can put this on the dispatch's started subject.
        const forged = journalEvent({
          type: 'started',
          id: 'w3:started:forged',
          tenant: TENANT,
          runId: run,
          dispatchId: 'w3',
          at: new Date().toISOString(),
          causationId: 'w3:decided',
          attempt: 1,
          toolName: 'quick3',
          executor: 'remote',
        });
        await t.nc.request(
          t.subjects.journal.event(TENANT, run, 'w3', 'started'),
          JSON.stringify(forged),
        );
        // Lease: the tool's 60 s deadline plus one ack wait — far past this test's patience.
        await dispatch(publisher, run, 'w3', await registerRemoteTool(t, 'quick3', 60_000), {});
        const [settled] = await settledAll(t, publisher, run, ['w3'], 15_000);
        expect(settled).toMatchObject({ outcome: 'ok', result: 3 });
        expect(await claims(replica, 'waited')).toBe(0);
        expect(worker.total()).toBe(1);
        expect(await journalCounts(t, run, 'w3')).toMatchObject({ started: 2, settled: 1 });
      } finally {
        worker.stop();
        await replica.stop();
      }
    }, 30_000);
  });
});
