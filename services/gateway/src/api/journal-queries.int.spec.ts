import { ErrorCode, QueryOperation, ToolgateError } from '@toolgate/contracts';
import { useTestNats, type TestNats, testKeys } from '@toolgate/testing';
import { JournalQueries } from './journal-queries';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('JournalQueries against a real broker', () => {
  let t: TestNats;
  let queries: JournalQueries;
  /** What the stand-in journal answers to `approvals.get`, as raw bytes. */
  let answer: string;
  /** The request bodies the stand-in journal received. */
  const received: unknown[] = [];

  beforeAll(async () => {
    t = await useTestNats('gateway-queries');
    t.nc.subscribe(t.subjects.query(QueryOperation.GetApproval), {
      callback: (_err, msg) => {
        received.push(JSON.parse(decoder.decode(msg.data)));
        msg.respond(encoder.encode(answer));
      },
    });
    await t.nc.flush();
    queries = new JournalQueries(t.nc, t.subjects, 1000, testKeys('gateway'));
  });
  afterAll(() => t?.cleanup());

  async function refusal(): Promise<ToolgateError> {
    const err = await queries.ask(QueryOperation.GetApproval, 'acme', { key: 'k' }).then(
      () => {
        throw new Error('expected a refusal');
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ToolgateError);
    return err as ToolgateError;
  }

  it("answers the journal's data, asking with the caller's tenant over the body's", async () => {
    answer = JSON.stringify({ ok: true, data: { dispatchId: 'd1', runId: 'r1' } });
    received.length = 0;
    await expect(
      queries.ask(QueryOperation.GetApproval, 'acme', { key: 'k', tenant: 'globex' }),
    ).resolves.toEqual({ dispatchId: 'd1', runId: 'r1' });
    expect(received).toEqual([{ key: 'k', tenant: 'acme' }]);
  });

  it("rebuilds the journal's typed error", async () => {
    answer = JSON.stringify({
      ok: false,
      error: { code: ErrorCode.NotFound, message: 'no such dispatch', details: { id: 'd1' } },
    });
    const err = await refusal();
    expect(err.toWire()).toEqual({
      code: ErrorCode.NotFound,
      message: 'no such dispatch',
      details: { id: 'd1' },
    });
  });

  it.each([
    ['a reply that is not JSON', 'garbled{'],
    ['a reply outside the envelope', JSON.stringify({ data: 1 })],
    [
      'an error with an unknown code',
      JSON.stringify({ ok: false, error: { code: 'x', message: 'y' } }),
    ],
  ])('refuses %s as internal', async (_what, raw) => {
    answer = raw;
    const err = await refusal();
    expect(err.code).toBe(ErrorCode.Internal);
    expect(err.message).not.toContain('garbled');
  });

  it("signs every query with the gateway's keys for the journal", async () => {
    answer = JSON.stringify({ ok: true, data: null });
    let check: unknown;
    const subject = t.subjects.query(QueryOperation.GetRun);
    const sub = t.nc.subscribe(subject, {
      callback: (_err, msg) => {
        check = testKeys('journal').verifyRequest(msg.subject, msg.data, msg.headers, ['gateway']);
        msg.respond(encoder.encode(answer));
      },
    });
    try {
      await t.nc.flush();
      await queries.ask(QueryOperation.GetRun, 'acme', { runId: 'r' });
      expect(check).toEqual({ ok: true, signer: 'gateway' });
    } finally {
      sub.unsubscribe();
    }
  });

  it('is unavailable when no journal answers', async () => {
    const lonely = await useTestNats('gateway-queries-none');
    try {
      const err = await new JournalQueries(lonely.nc, lonely.subjects, 1000, testKeys('gateway'))
        .ask(QueryOperation.GetApproval, 'acme', { key: 'k' })
        .catch((e: unknown) => e);
      expect((err as ToolgateError).code).toBe(ErrorCode.Unavailable);
    } finally {
      await lonely.cleanup();
    }
  });
});
