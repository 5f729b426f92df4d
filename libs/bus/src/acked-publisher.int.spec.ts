import { connect, headers as natsHeaders } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import { NATS_URL, useTestNats, type TestNats } from '@toolgate/testing';
import { AckedPublisher } from './acked-publisher';
import { ensureJournalStreams } from './journal-infrastructure';
import { isTransitionTaken, messagingFailure } from './nats-errors';

const body = new TextEncoder().encode('{}');

describe('AckedPublisher on a real JetStream server', () => {
  let t: TestNats;
  /** For the publishes that fail: short attempts and budget, so waiting them out is quick. */
  let publisher: AckedPublisher;
  /**
   * For the publishes the broker acks: the default attempt time and budget. 300 ms was short for
   * 200 acks at once on a loaded machine, and a publish without a message id is not sent again.
   */
  let roomy: AckedPublisher;
  const subject = (key: string) => t.subjects.journal.event('acme', 'run1', key, 'requested');

  beforeAll(async () => {
    t = await useTestNats('acked');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new AckedPublisher(t.nc, { attemptTimeoutMs: 300, budgetMs: 600 });
    roomy = new AckedPublisher(t.nc);
  });
  afterAll(() => t.cleanup());

  it('acks concurrent publishes each with its own stream sequence', async () => {
    const acks = await Promise.all(
      Array.from({ length: 200 }, (_, i) => roomy.publish(subject(`k${i}`), body)),
    );
    expect(new Set(acks.map((a) => a.seq)).size).toBe(200);
    expect(acks.every((a) => a.stream === t.subjects.journal.stream && !a.duplicate)).toBe(true);
  });

  it('sends the message id and the subject expectation the broker enforces', async () => {
    const first = await roomy.publish(subject('once'), body, {
      msgID: 'once-1',
      lastSubjectSequence: 0,
    });
    const retried = await roomy.publish(subject('once'), body, { msgID: 'once-1' });
    expect(retried).toMatchObject({ seq: first.seq, duplicate: true });
    const refused = await roomy
      .publish(subject('once'), body, { msgID: 'once-2', lastSubjectSequence: 0 })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(JetStreamApiError);
    expect(isTransitionTaken(refused)).toBe(true);
  });

  it('fails a publish no stream listens to', async () => {
    await expect(publisher.publish(`${t.prefix}.nowhere`, body)).rejects.toThrow(/no responders/);
  });

  it('fails a publish whose ack does not come in time, and one answered with garbage', async () => {
    const silent = `${t.prefix}.silent`;
    const garbled = `${t.prefix}.garbled`;
    t.nc.subscribe(silent, { callback: () => undefined });
    t.nc.subscribe(garbled, {
      callback: (_err, msg) => {
        msg.respond(new TextEncoder().encode('no'));
      },
    });
    await t.nc.flush();
    await expect(publisher.publish(silent, body)).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(publisher.publish(garbled, body)).rejects.toThrow(/not a PubAck/);
  });

  it('takes a status without a body for the broker’s answer: a 5xx sent again (same id), unavailable when it persists', async () => {
    const failing = `${t.prefix}.failing`;
    let asked = 0;
    t.nc.subscribe(failing, {
      callback: (_err, msg) => {
        asked++;
        msg.respond(new Uint8Array(0), { headers: natsHeaders(500, 'server error') });
      },
    });
    await t.nc.flush();
    const err = await publisher.publish(failing, body, { msgID: 'm1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect(asked).toBeGreaterThan(1);
    expect(messagingFailure(err, 'the message broker')?.code).toBe('unavailable');
    // Without a message id a second copy could be stored twice: not sent again.
    const once = asked;
    await publisher.publish(failing, body).catch(() => undefined);
    expect(asked).toBe(once + 1);
  });

  it('fails what is still waiting when closed or when its connection closes', async () => {
    const nc = await connect({ servers: NATS_URL });
    const own = new AckedPublisher(nc, { attemptTimeoutMs: 10_000 });
    const silent = `${t.prefix}.silent-2`;
    t.nc.subscribe(silent, { callback: () => undefined });
    await t.nc.flush();
    const waiting = own.publish(silent, body);
    own.close();
    await expect(waiting).rejects.toThrow(/closed before the reply came/);
    const orphan = own.publish(silent, body);
    await nc.close();
    await expect(orphan).rejects.toThrow(/closed/);
    await expect(own.publish(silent, body)).rejects.toThrow(/connection is closed/);
  });
});
