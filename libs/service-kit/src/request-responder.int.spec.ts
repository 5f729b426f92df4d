import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { z } from 'zod';
import { ToolgateError } from '@toolgate/contracts';
import { Attr, setupTelemetry, type Telemetry } from '@toolgate/telemetry';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { serveRequests } from './request-responder';

const decoder = new TextDecoder();

describe('serveRequests over real NATS request/reply', () => {
  let t: TestNats;
  const exporter = new InMemorySpanExporter();
  let telemetry: Telemetry;
  beforeAll(async () => {
    telemetry = setupTelemetry({ serviceName: 'responder-spec', exporter, simple: true });
    t = await useTestNats('responder');
  });
  afterAll(async () => {
    await t.cleanup();
    await telemetry.shutdown();
  });

  it('replies with the data, or with a typed error for every way a request can go wrong', async () => {
    const subject = `${t.prefix}.echo`;
    const served = serveRequests(t.nc, `${t.prefix}-q`, [
      {
        subject,
        async handle(body) {
          const { n } = z.object({ n: z.number() }).parse(body);
          if (n === 1) throw new ToolgateError('not-found', 'no such thing');
          if (n === 2) throw new Error('secret detail');
          // The handler's own use of the broker failing: a request nobody answers.
          if (n === 3) await t.nc.request(`${t.prefix}.nobody`, '', { timeout: 1000 });
          return { doubled: n * 2 };
        },
      },
    ]);
    // Every request here is answered: 10 s, a deadline no loaded run reaches (the handler's own
    // unanswered request alone may take its 1 s).
    const ask = async (payload: string) =>
      JSON.parse(decoder.decode((await t.nc.request(subject, payload, { timeout: 10_000 })).data));
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
      expect(await ask('{"n":3}')).toMatchObject({
        ok: false,
        error: { code: 'unavailable', message: 'the message broker is not reachable; retry later' },
      });
    } finally {
      await served.stop();
    }
    // The span keeps what the reply hides: every refusal's code, and an internal failure's cause.
    const spans = exporter.getFinishedSpans().filter((s) => s.name === `process ${subject}`);
    const byCode = (code: string) => spans.filter((s) => s.attributes[Attr.ErrorCode] === code);
    expect(spans).toHaveLength(6);
    expect(byCode('invalid-request')).toHaveLength(2);
    expect(byCode('not-found').map((s) => s.status.code)).toEqual([SpanStatusCode.UNSET]);
    expect(byCode('internal').map((s) => s.status)).toEqual([
      { code: SpanStatusCode.ERROR, message: 'secret detail' },
    ]);
  });

  it('answers an answer over the broker max_payload as too-large at once, instead of dropping it', async () => {
    const subject = `${t.prefix}.huge`;
    const max = t.nc.info!.max_payload;
    const served = serveRequests(t.nc, `${t.prefix}-q`, [
      { subject, handle: async () => ({ blob: 'x'.repeat(max) }) },
    ]);
    try {
      // The old responder's respond() threw, the throw was swallowed, and this request timed out.
      const reply = JSON.parse(
        decoder.decode((await t.nc.request(subject, '{}', { timeout: 5000 })).data),
      );
      expect(reply).toMatchObject({ ok: false, error: { code: 'too-large' } });
    } finally {
      await served.stop();
    }
  });

  it('refuses to start signed endpoints without keys to verify them', () => {
    const subject = `${t.prefix}.signed`;
    expect(() =>
      serveRequests(t.nc, `${t.prefix}-q`, [
        { subject, signedBy: ['gateway'], handle: async () => 'never' },
      ]),
    ).toThrow(
      expect.objectContaining({
        code: 'config',
        message: expect.stringContaining(subject),
        details: { subjects: [subject] },
      }),
    );
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
