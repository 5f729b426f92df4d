import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import {
  callEvents,
  useTestNats,
  type TestNats,
  signedHeaders,
  publishSigned,
  testJournalKeys,
} from '@toolgate/testing';
import { ensureJournalStreams, readJournalCalls, type JournalCallsStats } from './index';

async function collect(iterable: AsyncIterable<{ decided: { dispatchId: string } }>) {
  const ids: string[] = [];
  for await (const call of iterable) ids.push(call.decided.dispatchId);
  return ids;
}

describe('readJournalCalls on a real JetStream server', () => {
  let t: TestNats;
  let js: JetStreamClient;

  beforeAll(async () => {
    t = await useTestNats('calls');
    js = jetstream(t.nc);
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(() => t.cleanup());

  it('reads nothing from an empty stream, and leaves no consumer behind', async () => {
    const reader = readJournalCalls(
      js,
      t.jsm,
      t.subjects,
      { tenant: 'acme' },
      { keys: testJournalKeys() },
    );
    expect(await collect(reader)).toEqual([]);
    expect(reader.stats).toMatchObject({ total: 0, read: 0, undecided: 0 });
    const consumers = await t.jsm.consumers.list(t.subjects.journal.stream).next();
    expect(consumers).toEqual([]);
  });

  it("joins each requested with its decided, in stream order, for one tenant's runs", async () => {
    const a = callEvents({ dispatchId: 'a', input: { command: 'ls' } });
    const b = callEvents({ dispatchId: 'b', runId: 'run-2', verdict: 'deny' });
    const c = callEvents({ dispatchId: 'c', verdict: 'ask' });
    const inFlight = callEvents({ dispatchId: 'in-flight' });
    const other = callEvents({ dispatchId: 'x', tenant: 'globex' });
    // Interleaved as concurrent dispatches are: b is requested first but decided last.
    await publishSigned(js, t.subjects, [
      b.requested,
      a.requested,
      ...a.all.slice(1),
      c.requested,
      other.requested,
    ]);
    await publishSigned(js, t.subjects, [
      c.decided,
      inFlight.requested,
      ...other.all.slice(1),
      ...b.all.slice(1),
    ]);
    // Not an event at all, on a requested subject: skipped and counted.
    const junk = t.subjects.journal.event('acme', 'run-1', 'junk', 'requested');
    await js.publish(junk, 'not json', { headers: signedHeaders(junk, 'not json') });
    // A call another client wrote on the subjects, unsigned: never replayed.
    const forged = callEvents({ dispatchId: 'forged', runId: 'run-1' });
    for (const e of [forged.requested, forged.decided])
      await js.publish(
        t.subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type),
        JSON.stringify(e),
      );

    const progress: JournalCallsStats[] = [];
    const reader = readJournalCalls(
      js,
      t.jsm,
      t.subjects,
      { tenant: 'acme' },
      {
        keys: testJournalKeys(),
        onProgress: (s) => progress.push({ ...s }),
        progressEvery: 2,
        batch: 2,
      },
    );
    const calls = [];
    for await (const call of reader) calls.push(call);
    expect(calls.map((c) => c.decided.dispatchId)).toEqual(['a', 'c', 'b']);
    expect(calls[0]!.requested).toEqual(a.requested);
    expect(calls[0]!.decided).toEqual(a.decided);
    expect(calls.map((c) => c.seq)).toEqual([...calls.map((c) => c.seq)].sort((x, y) => x - y));
    // 4 requested + 3 decided + the junk message and the forged call of acme; globex's are never
    // delivered.
    expect(reader.stats).toMatchObject({
      total: 10,
      read: 10,
      skipped: 3,
      untrusted: 2,
      undecided: 1,
    });
    expect(progress[0]).toMatchObject({ total: 10, read: 0 });
    expect(progress.at(-1)).toMatchObject({ read: 10, undecided: 1 });
    expect(progress.length).toBeGreaterThan(3);

    expect(
      await collect(
        readJournalCalls(
          js,
          t.jsm,
          t.subjects,
          { tenant: 'acme', runId: 'run-2' },
          { keys: testJournalKeys() },
        ),
      ),
    ).toEqual(['b']);
    expect(
      await collect(
        readJournalCalls(js, t.jsm, t.subjects, { tenant: 'globex' }, { keys: testJournalKeys() }),
      ),
    ).toEqual(['x']);
    expect(
      await collect(
        readJournalCalls(js, t.jsm, t.subjects, { tenant: 'initech' }, { keys: testJournalKeys() }),
      ),
    ).toEqual([]);
    const consumers = await t.jsm.consumers.list(t.subjects.journal.stream).next();
    expect(consumers).toEqual([]);
  });

  it('reads from an instant on: a decision whose request came before it is not a call of the window', async () => {
    const early = callEvents({ tenant: 'since', dispatchId: 'early' });
    const straddles = callEvents({ tenant: 'since', dispatchId: 'straddles' });
    const late = callEvents({ tenant: 'since', dispatchId: 'late' });
    await publishSigned(js, t.subjects, [...early.all, straddles.requested]);
    // The stream stamps messages with the server's clock; leave a gap around the instant.
    await sleep(50);
    const since = new Date();
    await sleep(50);
    await publishSigned(js, t.subjects, [...straddles.all.slice(1), ...late.all]);
    const reader = readJournalCalls(
      js,
      t.jsm,
      t.subjects,
      { tenant: 'since', since },
      { keys: testJournalKeys() },
    );
    expect(await collect(reader)).toEqual(['late']);
    expect(reader.stats).toMatchObject({ total: 3, read: 3, undecided: 0 });
  });
});
