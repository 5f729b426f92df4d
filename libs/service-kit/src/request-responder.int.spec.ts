import { z } from 'zod';
import { ToolgateError } from '@toolgate/contracts';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { serveRequests } from './request-responder';

const decoder = new TextDecoder();

describe('serveRequests over real NATS request/reply', () => {
  let t: TestNats;
  beforeAll(async () => {
    t = await useTestNats('responder');
  });
  afterAll(() => t.cleanup());

  it('replies with the data, or with a typed error for every way a request can go wrong', async () => {
    const subject = `${t.prefix}.echo`;
    const served = serveRequests(t.nc, `${t.prefix}-q`, [
      {
        subject,
        async handle(body) {
          const { n } = z.object({ n: z.number() }).parse(body);
          if (n === 1) throw new ToolgateError('not-found', 'no such thing');
          if (n === 2) throw new Error('secret detail');
          return { doubled: n * 2 };
        },
      },
    ]);
    const ask = async (payload: string) =>
      JSON.parse(decoder.decode((await t.nc.request(subject, payload, { timeout: 2000 })).data));
    try {
      expect(await ask('{"n":21}')).toEqual({ ok: true, data: { doubled: 42 } });
      expect(await ask('{not json')).toMatchObject({
        ok: false,
        error: { code: 'invalid-request' },
      });
      expect(await ask('{"n":"x"}')).toMatchObject({
        ok: false,
        error: { code: 'invalid-request' },
      });
      expect(await ask('{"n":1}')).toEqual({
        ok: false,
        error: { code: 'not-found', message: 'no such thing' },
      });
      const internal = await ask('{"n":2}');
      expect(internal).toEqual({
        ok: false,
        error: { code: 'internal', message: 'internal error' },
      });
    } finally {
      await served.stop();
    }
  });

  it('finishes the requests in flight when it stops', async () => {
    const subject = `${t.prefix}.slow`;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reached!: () => void;
    const inHandler = new Promise<void>((resolve) => (reached = resolve));
    const served = serveRequests(t.nc, `${t.prefix}-q`, [
      {
        subject,
        handle: async () => {
          reached();
          await gate;
          return 'done';
        },
      },
    ]);
    const reply = t.nc.request(subject, '{}', { timeout: 5000 });
    await inHandler;
    const stopped = served.stop();
    release();
    await stopped;
    expect(JSON.parse(decoder.decode((await reply).data))).toEqual({ ok: true, data: 'done' });
  });
});
