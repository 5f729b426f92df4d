import { useTestNats, type TestNats } from '@toolgate/testing';
import { InboxRequests, NoRespondersError, RequestTimeoutError } from './inbox-requests';

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
