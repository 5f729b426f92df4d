import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { jetstream } from '@nats-io/jetstream';
import type { JournalEvent } from '@toolgate/contracts';
import {
  callEvents,
  eventually,
  testJournalKeys,
  useTestNats,
  type TestNats,
} from '@toolgate/testing';
import {
  ensureConsumer,
  ensureJournalStreams,
  JournalPublisher,
  runJournalConsumer,
  type RunningConsumer,
} from './index';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/**
 * A consumer's workers keep nothing of what they handled. With 64 workers and one event at a time,
 * each event went to the worker idle the longest, whose frame then held that message, its event
 * and its headers until its next turn — 64 events later, and for good once traffic stopped: an
 * evaluator or executor (256 workers) holding 256 events, their inputs included. Each handled event is watched
 * through a weak reference; once the consumer is idle and the heap collected, none of them is
 * still alive.
 */
describe('a consumer that has handled its events', () => {
  let t: TestNats;
  let consumer: RunningConsumer | undefined;

  beforeAll(async () => {
    t = await useTestNats('retention');
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.cleanup();
  });

  it('keeps none of them alive once idle', async () => {
    const handled: WeakRef<JournalEvent>[] = [];
    const info = await ensureConsumer(t.jsm, t.subjects, {
      role: 'evaluator',
      eventType: 'requested',
    });
    consumer = runJournalConsumer({
      js: jetstream(t.nc),
      subjects: t.subjects,
      role: 'evaluator',
      consumer: info,
      keys: testJournalKeys(),
      concurrency: 64,
      handle: async (event) => {
        handled.push(new WeakRef(event));
      },
    });
    await consumer.ready;
    const publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
    // One at a time, as a dispatch's events come when load is light; each a large input.
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 40; i++) {
      await publisher.append(
        callEvents({ dispatchId: `kept-${i}`, input: { big: `${i}${big}` } }).requested,
      );
      await eventually(() => (handled.length === i + 1 ? true : undefined));
    }
    publisher.close();
    // Idle: the next pull is out, nothing in flight.
    await eventually(() => (consumer!.inFlight().length === 0 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 50));
    collectGarbage();
    collectGarbage();
    const alive = handled.filter((ref) => ref.deref() !== undefined).length;
    // The last one may still sit in the pull's bookkeeping until its next message.
    expect(alive).toBeLessThanOrEqual(1);
  });
});
