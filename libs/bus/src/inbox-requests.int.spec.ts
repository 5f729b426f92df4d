import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  startNatsServer,
  useTestNats,
  type NatsServerProcess,
  type TestNats,
} from '@toolgate/testing';
import {
  InboxRequests,
  NoRespondersError,
  RequestNotSentError,
  RequestTimeoutError,
} from './inbox-requests';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('InboxRequests on a real NATS server', () => {
  let t: TestNats;
  let requests: InboxRequests;

  beforeAll(async () => {
    t = await useTestNats('inbox');
    requests = new InboxRequests(t.nc);
  });
  afterAll(async () => {
    requests.close();
    await t.cleanup();
  });

  it('matches each reply to its request when replies come back out of order', async () => {
    const subject = `${t.prefix}.echo`;
    t.nc.subscribe(subject, {
      callback: (_err, msg) => {
        const n = Number(decoder.decode(msg.data));
        // Later requests are answered first.
        setTimeout(() => msg.respond(encoder.encode(`re:${n}`)), 50 - n);
      },
    });
    await t.nc.flush();
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, n) =>
        requests.request(subject, encoder.encode(String(n)), { timeoutMs: 5000 }),
      ),
    );
    expect(replies.map((m) => decoder.decode(m.data))).toEqual(
      Array.from({ length: 40 }, (_, n) => `re:${n}`),
    );
  });

  it('says when nobody listens', async () => {
    await expect(
      requests.request(`${t.prefix}.nobody`, encoder.encode('x'), { timeoutMs: 5000 }),
    ).rejects.toBeInstanceOf(NoRespondersError);
  });

  it('times out each request on its own deadline', async () => {
    const subject = `${t.prefix}.slow`;
    t.nc.subscribe(subject, {
      callback: (_err, msg) => {
        setTimeout(() => msg.respond(encoder.encode('late')), 300);
      },
    });
    await t.nc.flush();
    const short = requests.request(subject, encoder.encode('a'), { timeoutMs: 100 });
    const long = requests.request(subject, encoder.encode('b'), { timeoutMs: 5000 });
    await expect(short).rejects.toBeInstanceOf(RequestTimeoutError);
    await expect(short).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(decoder.decode((await long).data)).toBe('late');
  });
});

describe('InboxRequests while the broker is away', () => {
  let broker: NatsServerProcess;
  let nc: NatsConnection;
  let requests: InboxRequests;
  const subject = 'svc.echo';

  beforeAll(async () => {
    broker = await startNatsServer({ jetstream: false });
    nc = await connect({ servers: broker.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    requests = new InboxRequests(nc);
    nc.subscribe(subject, { callback: (_err, msg) => void msg.respond(msg.data) });
    await nc.flush();
  });
  afterAll(async () => {
    requests.close();
    await nc.close();
    await broker.cleanup();
  });

  /** Resolves at the connection's next status event of `type`. */
  const next = async (type: 'disconnect' | 'reconnect') => {
    for await (const s of nc.status()) if (s.type === type) return;
  };

  it('fails a request at once while the connection is down (the client would drop it), and sends again once it is back', async () => {
    const disconnected = next('disconnect');
    await broker.kill();
    await disconnected;
    // A minute-long deadline: waiting it out would fail the test by its own timeout.
    const refused = await requests
      .request(subject, encoder.encode('lost'), { timeoutMs: 60_000 })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RequestNotSentError);
    expect(refused).toMatchObject({ name: 'ConnectionError' });

    const reconnected = next('reconnect');
    await broker.start();
    await reconnected;
    const reply = await requests.request(subject, encoder.encode('back'), { timeoutMs: 5000 });
    expect(decoder.decode(reply.data)).toBe('back');
  });
});
