import { jetstream } from '@nats-io/jetstream';
import {
  BROKER_SHAPES,
  callEvents,
  startTestBroker,
  testJournalKeys,
  useTestNats,
  type TestBroker,
  type TestNats,
} from '@toolgate/testing';
import {
  ensureConsumer,
  ensureJournalStreams,
  JournalPublisher,
  runJournalConsumer,
  type RunningConsumer,
} from './index';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A pull the broker drops without a word: nats-server 2.9 ends an expired pull with a 408, but a
 * message arriving as a partly filled pull expires can make it drop the pull unannounced, and the
 * client then waits two missed idle heartbeats (a second) with nothing pulled while events wait.
 * Two consumers with wide pulls (256 in flight, so each pull expires part-filled every second) are
 * fed a steady 200 events a second for 12 s — some 24 expiries, of which about one in twenty was
 * dropped so in the runs that found it — and no event may wait near a second for its handler, on
 * the single node and on a 3-node cluster (R3 streams, consumers led by one node of three).
 */
describe.each(BROKER_SHAPES)(
  'a consumer whose pull the broker drops as it expires ($shape)',
  (shape) => {
    let broker: TestBroker;
    let t: TestNats;
    let publisher: JournalPublisher;
    const running: RunningConsumer[] = [];

    beforeAll(async () => {
      broker = await startTestBroker(shape, 'silentpull');
      t = await useTestNats('silentpull', { servers: broker.servers });
      await ensureJournalStreams(t.jsm, t.subjects, { replicas: shape.replicas });
      publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
    }, 60_000);
    afterAll(async () => {
      for (const consumer of running) await consumer.stop();
      publisher?.close();
      await t?.cleanup();
      await broker?.cleanup();
    }, 60_000);

    it('sends the next pull once the last is overdue, so no event waits out the dropped one', async () => {
      // Each event's lag runs from when this process heard of it on a plain subscription (no pull
      // to drop): a machine too busy to run this process's callbacks delays both alike (a whole CI
      // run, its suites side by side, once held an event 1.5 s so), a dropped pull the consumer's.
      const heardAt = new Map<string, number>();
      const heard = t.nc.subscribe(t.subjects.journal.ofType('requested'), {
        callback: (_err, m) => void heardAt.set(m.subject.split('.').at(-2)!, performance.now()),
      });
      await t.nc.flush();
      const handledAt: Record<string, Map<string, number>> = {
        evaluator: new Map(),
        journal: new Map(),
      };
      for (const [role, eventType] of [
        ['evaluator', 'requested'],
        ['journal', '*'],
      ] as const) {
        const consumer = await ensureConsumer(t.jsm, t.subjects, { role, eventType });
        const run = runJournalConsumer({
          js: jetstream(t.nc),
          subjects: t.subjects,
          role,
          consumer,
          keys: testJournalKeys(),
          concurrency: 256,
          handle: async (event) => {
            handledAt[role]!.set(event.dispatchId, performance.now());
          },
        });
        running.push(run);
        await run.ready;
      }

      const rate = 200;
      const seconds = 12;
      const appends: Promise<unknown>[] = [];
      const t0 = performance.now();
      for (let i = 0; i < rate * seconds;) {
        for (; i < ((performance.now() - t0) / 1000) * rate && i < rate * seconds; i++) {
          const dispatchId = `steady-${i}`;
          appends.push(publisher.append(callEvents({ dispatchId }).requested));
        }
        await sleep(2);
      }
      await Promise.all(appends);
      const total = rate * seconds;
      while (handledAt.evaluator!.size + handledAt.journal!.size < 2 * total) await sleep(50);
      while (heardAt.size < total) await sleep(50);
      heard.unsubscribe();
      const lags = (role: string) =>
        [...handledAt[role]!].map(([dispatchId, at]) => at - heardAt.get(dispatchId)!);

      // A dropped pull costs its events a second; one sent 100 ms past the expiry, ~0.1 s.
      expect(Math.max(...lags('evaluator'))).toBeLessThan(800);
      expect(Math.max(...lags('journal'))).toBeLessThan(800);
    }, 60_000);
  },
);
