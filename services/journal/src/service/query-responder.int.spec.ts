import { QueryOperation } from '@toolgate/contracts';
import { headers as natsHeaders, type Msg } from '@nats-io/transport-node';
import { requestReply } from '@toolgate/bus';
import { testKeys, useTestNats, type TestNats } from '@toolgate/testing';
import { metricsFor, type ServedEndpoints } from '@toolgate/service-kit';
import { z } from 'zod';
import { at, dispatchFixture, sequenced } from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvent } from '../projection/apply-event';
import { serveQueries } from './query-responder';

const decoder = new TextDecoder();

/** acme/run-1: d1 parked on an approval since t=10; d2 settled. */
const d1 = dispatchFixture({ dispatchId: 'd1' });
const d2 = dispatchFixture({ dispatchId: 'd2', toolName: 'shell', input: { cmd: 'ls' } });
const journal = sequenced([
  d1.requested(0),
  d1.decided(10, 'ask'),
  d1.suspended(10, 600),
  d2.requested(11),
  d2.decided(12, 'deny', 'no shell'),
  d2.settled(12, 'denied'),
]);

describe('journal queries over NATS request/reply', () => {
  let nats: TestNats;
  let t: JournalTestDb;
  let served: ServedEndpoints;
  beforeAll(async () => {
    [nats, t] = await Promise.all([useTestNats('queries'), useJournalDb('responder')]);
    for (const entry of journal) await applyEvent(t.db, entry);
    // The service's clock, not the wall clock: t=40 s, 30 s after d1 was parked.
    served = serveQueries(
      nats.nc,
      nats.subjects,
      t.db,
      () => new Date(Date.parse(at(40))),
      testKeys('journal'),
    );
  });
  afterAll(async () => {
    await served?.stop();
    await Promise.all([nats?.cleanup(), t?.cleanup()]);
  });

  /** A query as the gateway sends it (signed for the journal); `signed: false` as a raw client. */
  const ask = async (operation: QueryOperation, body: unknown, signed = true) => {
    const subject = nats.subjects.query(operation);
    const payload = new TextEncoder().encode(JSON.stringify(body));
    const h = natsHeaders();
    if (signed) testKeys('gateway').signRequest(subject, 'journal', payload, h);
    const reply = await nats.nc.request(subject, payload, { timeout: 5000, headers: h });
    return JSON.parse(decoder.decode(reply.data)) as {
      ok: boolean;
      data?: unknown;
      error?: { code: string };
    };
  };

  it('answers nobody but the gateway: a raw client asking for a tenant gets unauthorized', async () => {
    for (const operation of Object.values(QueryOperation)) {
      expect(
        await ask(operation, { tenant: 'acme', runId: 'run-1', dispatchId: 'd1', key: 'k' }, false),
      ).toMatchObject({ ok: false, error: { code: 'unauthorized' } });
    }
  });

  it('answers a captured query once: the same bytes and headers again are a replay, refused and counted', async () => {
    const subject = nats.subjects.query(QueryOperation.GetDispatch);
    // An eavesdropper on the subject sees the query as the gateway sent it.
    const wire = nats.nc.subscribe(subject, { max: 1 });
    const captured = (async (): Promise<Msg | undefined> => {
      for await (const msg of wire) return msg;
    })();
    // Sent as the gateway sends its queries: requestReply, signed with the gateway's keys.
    const answer = await requestReply(
      nats.nc,
      subject,
      { tenant: 'acme', dispatchId: 'd1' },
      {
        ok: z.object({ ok: z.literal(true), data: z.unknown() }),
        timeoutMs: 5000,
        peer: 'the journal service',
        sign: { keys: testKeys('gateway'), responder: 'journal' },
      },
    );
    expect(answer).toMatchObject({ data: { dispatch: { dispatchId: 'd1' } } });
    const msg = (await captured)!;
    expect(msg.headers?.get('Toolgate-Nonce')).toBeTruthy();
    const replayed = await nats.nc.request(subject, msg.data, {
      timeout: 5000,
      headers: msg.headers!,
    });
    expect(JSON.parse(decoder.decode(replayed.data))).toMatchObject({
      ok: false,
      error: { code: 'unauthorized', details: { reason: 'replayed' } },
    });
    expect(await metricsFor(nats.nc).render()).toContain(
      'toolgate_untrusted_events_total{role="request",reason="replayed"} 1',
    );
  });

  it("answers a tenant's dispatch and run, and not another tenant's", async () => {
    expect(
      await ask(QueryOperation.GetDispatch, { tenant: 'acme', dispatchId: 'd1' }),
    ).toMatchObject({
      ok: true,
      data: { dispatch: { dispatchId: 'd1', status: 'suspended' }, events: { length: 3 } },
    });
    expect(
      await ask(QueryOperation.GetDispatch, { tenant: 'globex', dispatchId: 'd1' }),
    ).toMatchObject({ ok: false, error: { code: 'not-found' } });
    expect(await ask(QueryOperation.GetRun, { tenant: 'acme', runId: 'run-1' })).toMatchObject({
      ok: true,
      data: { status: 'suspended', pending: [{ dispatchId: 'd1' }] },
    });
    // An unknown run is not found, as an unknown dispatch is (not a 200 with no status).
    expect(await ask(QueryOperation.GetRun, { tenant: 'globex', runId: 'run-1' })).toMatchObject({
      ok: false,
      error: { code: 'not-found', details: { runId: 'run-1' } },
    });
  });

  it('lists approvals by age on the service clock, and finds one by key', async () => {
    const list = (minAgeMs: number) =>
      ask(QueryOperation.ListApprovals, { tenant: 'acme', minAgeMs });
    expect(await list(20_000)).toMatchObject({
      ok: true,
      data: { approvals: [{ dispatchId: 'd1' }] },
    });
    expect(await list(40_000)).toEqual({ ok: true, data: { approvals: [], nextCursor: null } });

    expect(
      await ask(QueryOperation.GetApproval, { tenant: 'acme', key: d1.approvalKey }),
    ).toMatchObject({ ok: true, data: { dispatchId: 'd1', status: 'pending' } });
    // A dispatch's approval under another key is no answer.
    expect(
      await ask(QueryOperation.GetApproval, {
        tenant: 'acme',
        key: d2.approvalKey,
        dispatchId: 'd1',
      }),
    ).toEqual({ ok: true, data: null });
  });

  it('refuses a body that does not match its query as invalid-request', async () => {
    const refused = { ok: false, error: { code: 'invalid-request' } };
    expect(await ask(QueryOperation.GetDispatch, { dispatchId: 'd1' })).toMatchObject(refused);
    expect(
      await ask(QueryOperation.GetDispatch, { tenant: 'acme', dispatchId: 'acme.>' }),
    ).toMatchObject(refused);
    expect(await ask(QueryOperation.GetRun, { tenant: 'acme' })).toMatchObject(refused);
    expect(await ask(QueryOperation.ListApprovals, { tenant: 'acme', limit: 0 })).toMatchObject(
      refused,
    );
    expect(await ask(QueryOperation.GetApproval, { tenant: 'acme' })).toMatchObject(refused);
  });
});
