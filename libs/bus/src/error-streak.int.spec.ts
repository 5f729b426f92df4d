import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { RUN_KEY } from '@toolgate/contracts';
import { NATS_URL, useTestNats, type TestNats, testJournalKeys } from '@toolgate/testing';
import { ensureJournalStreams, ErrorStreaks, JournalPublisher } from './index';

/**
 * The error streak lives in the journal: replicas on their own connections share it, a new process
 * reads what an old one wrote, and concurrent settlements in one run never lose a count.
 */
describe('ErrorStreaks on a real JetStream server', () => {
  let t: TestNats;
  const connections: NatsConnection[] = [];
  const publishers: JournalPublisher[] = [];
  const now = () => new Date('2026-11-30T00:00:00.000Z');

  /** A replica: its own connection and publisher, as a second service process would have. */
  async function replica(): Promise<ErrorStreaks> {
    const nc = await connect({ servers: NATS_URL });
    connections.push(nc);
    const publisher = new JournalPublisher(nc, t.subjects, testJournalKeys());
    publishers.push(publisher);
    return new ErrorStreaks(publisher, now);
  }

  beforeAll(async () => {
    t = await useTestNats('streak');
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(async () => {
    for (const p of publishers) p.close();
    for (const nc of connections) await nc.drain();
    await t?.cleanup();
  });

  it('counts every failure of concurrent settlements on two replicas exactly once', async () => {
    const [a, b] = [await replica(), await replica()];
    const ids = Array.from({ length: 24 }, (_, i) => `d${i}`);
    await Promise.all(ids.map((id, i) => (i % 2 ? a : b).record('acme', 'r1', id, 'error')));
    // Every settlement redone (a crash between the streak and `settled`): no double count.
    await Promise.all(ids.map((id, i) => (i % 2 ? b : a).record('acme', 'r1', id, 'error')));
    expect(await a.current('acme', 'r1')).toMatchObject({ failures: 24 });
    expect(await (await replica()).current('acme', 'r1')).toMatchObject({ failures: 24 });
  });

  it('a success ends the streak for every replica; a later failure starts a new one', async () => {
    const [a, b] = [await replica(), await replica()];
    await a.record('acme', 'r2', 'x1', 'denied');
    await b.record('acme', 'r2', 'x2', 'error');
    expect((await b.current('acme', 'r2')).failures).toBe(2);
    await b.record('acme', 'r2', 'x3', 'ok');
    expect((await a.current('acme', 'r2')).failures).toBe(0);
    await a.record('acme', 'r2', 'x4', 'error');
    expect((await b.current('acme', 'r2')).failures).toBe(1);
  });

  it('a reset ends the streak, says what it was, and is journaled with who did it', async () => {
    const a = await replica();
    for (const id of ['y1', 'y2', 'y3']) await a.record('acme', 'r3', id, 'error');
    expect(await (await replica()).reset('acme', 'r3', 'ops@acme')).toBe(3);
    expect((await a.current('acme', 'r3')).failures).toBe(0);
    expect(await a.reset('acme', 'r3', 'ops@acme')).toBe(0);
    const last = await publishers[0]!.last('acme', 'r3', 'run', 'error-streak');
    expect(last?.event).toMatchObject({ cause: 'reset', resetBy: 'ops@acme', failures: 0 });
  });

  it('keeps runs and tenants apart', async () => {
    const a = await replica();
    await a.record('acme', 'r4', 'z1', 'error');
    expect((await a.current('acme', 'r5')).failures).toBe(0);
    expect((await a.current('globex', 'r4')).failures).toBe(0);
  });

  it('reads through messages nobody signed: a forgery neither resets the streak nor blocks it', async () => {
    const a = await replica();
    for (const id of ['f1', 'f2']) await a.record('acme', 'r6', id, 'error');
    // On an open broker, a client publishes a streak of zero on the run's subject, twice.
    const subject = t.subjects.journal.event('acme', 'r6', RUN_KEY, 'error-streak');
    const forged = JSON.stringify({ type: 'error-streak', failures: 0, recent: [] });
    for (let i = 0; i < 2; i++)
      await jetstream(t.nc).publish(subject, new TextEncoder().encode(forged), {
        headers: natsHeaders(),
      });
    const b = await replica();
    expect((await b.current('acme', 'r6')).failures).toBe(2);
    // The next failure is recorded after the forgeries, at once, and counts on from 2.
    await b.record('acme', 'r6', 'f3', 'error');
    expect((await a.current('acme', 'r6')).failures).toBe(3);
    expect(await b.reset('acme', 'r6', 'ops@acme')).toBe(3);
    expect((await a.current('acme', 'r6')).failures).toBe(0);
  });
});
