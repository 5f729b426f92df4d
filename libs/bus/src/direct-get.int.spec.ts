import { headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { hasErrorCode, toWireError } from '@toolgate/contracts';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { DirectGetError, DirectGets } from './direct-get';
import { ensureJournalStreams } from './journal-infrastructure';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('DirectGets on a real JetStream server', () => {
  let t: TestNats;
  let direct: DirectGets;
  const subject = (key: string, type: 'requested' | 'settled' = 'requested') =>
    t.subjects.journal.event('acme', 'run1', key, type);

  beforeAll(async () => {
    t = await useTestNats('direct');
    await ensureJournalStreams(t.jsm, t.subjects);
    // The reads that are answered get the default attempt time and budget: 500 ms and 1 s were
    // short for an answer on a loaded machine. The missing stream's case has a short one of its own.
    direct = new DirectGets(t.nc);
  });
  afterAll(async () => {
    direct.close();
    await t.cleanup();
  });

  it('reads the last message on a subject with its sequence, time, subject and headers', async () => {
    const js = jetstream(t.nc);
    const h = headers();
    h.set('Toolgate-Test', 'yes');
    await js.publish(subject('a'), encoder.encode('first'));
    const before = Date.now();
    const ack = await js.publish(subject('a'), encoder.encode('second'), { headers: h });
    const msg = await direct.get(t.subjects.journal.stream, { last_by_subj: subject('a') });
    expect(msg).not.toBeNull();
    expect(decoder.decode(msg!.data)).toBe('second');
    expect(msg!.seq).toBe(ack.seq);
    expect(msg!.subject).toBe(subject('a'));
    expect(msg!.header.get('Toolgate-Test')).toBe('yes');
    expect(Math.abs(msg!.time.getTime() - before)).toBeLessThan(60_000);
  });

  it('reads by sequence, and the next message on a subject from a sequence', async () => {
    const js = jetstream(t.nc);
    const one = await js.publish(subject('b'), encoder.encode('b1'));
    await js.publish(subject('c'), encoder.encode('c1'));
    const two = await js.publish(subject('b'), encoder.encode('b2'));
    const bySeq = await direct.get(t.subjects.journal.stream, { seq: one.seq });
    expect(decoder.decode(bySeq!.data)).toBe('b1');
    const next = await direct.get(t.subjects.journal.stream, {
      seq: one.seq + 1,
      next_by_subj: subject('b'),
    });
    expect(next!.seq).toBe(two.seq);
  });

  it('answers null for a subject with no message and a sequence past the end', async () => {
    expect(
      await direct.get(t.subjects.journal.stream, { last_by_subj: subject('none', 'settled') }),
    ).toBeNull();
    const { last_seq } = (await t.jsm.streams.info(t.subjects.journal.stream)).state;
    expect(await direct.get(t.subjects.journal.stream, { seq: last_seq + 100 })).toBeNull();
  });

  it("fails a query the broker refuses as internal (not retryable), with the broker's status", async () => {
    // Sequence 0 names no message: the broker answers 408 Empty Request.
    const err = await direct.get(t.subjects.journal.stream, { seq: 0 }).catch((e: unknown) => e);
    expect(hasErrorCode(err, 'internal')).toBe(true);
    expect(err).toMatchObject({ retryable: false, details: { status: 408 } });
    // On the wire it is one of the stable codes, with its status.
    expect(toWireError(err)).toEqual({
      code: 'internal',
      message: expect.stringContaining('direct get failed: 408'),
      details: { status: 408, description: expect.any(String) },
    });
  });

  it("takes the broker's own trouble (a 5xx) as unavailable and retryable", () => {
    expect(new DirectGetError(503, 'No Responders')).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { status: 503 },
    });
    expect(new DirectGetError(0, 'the broker answered without headers')).toMatchObject({
      code: 'internal',
      retryable: false,
    });
  });

  it('fails, as the client does, on a stream that does not exist', async () => {
    // Asked again until the budget is spent: a short one, so the wait is short.
    const impatient = new DirectGets(t.nc, { attemptTimeoutMs: 500, budgetMs: 1000 });
    const err = await impatient
      .get(`${t.subjects.journal.stream}_missing`, { last_by_subj: subject('a') })
      .catch((e: unknown) => e as Error)
      .finally(() => impatient.close());
    expect(err).toBeInstanceOf(Error);
    expect(['NoRespondersError', 'TimeoutError']).toContain((err as Error).name);
  });
});
