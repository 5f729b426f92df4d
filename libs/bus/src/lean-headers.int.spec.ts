import {
  createInbox,
  headers as clientHeaders,
  MsgHdrsImpl,
  type Msg,
} from '@nats-io/transport-node';
import { AckPolicy, jetstream } from '@nats-io/jetstream';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { headersOf, leanHeaders, LeanHeaders } from './lean-headers';
import { ensureJournalStreams } from './journal-infrastructure';

const encoder = new TextEncoder();

describe('lean headers through a real NATS server', () => {
  let t: TestNats;

  beforeAll(async () => {
    t = await useTestNats('leanhdr');
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(() => t.cleanup());

  /** A core message on `subject` as a subscriber receives it, published with `headers`. */
  async function received(subject: string, headers?: ReturnType<typeof leanHeaders>): Promise<Msg> {
    const sub = t.nc.subscribe(subject, { max: 1 });
    t.nc.publish(subject, encoder.encode('payload'), headers ? { headers } : {});
    for await (const m of sub) return m;
    throw new Error('no message');
  }

  it('what one process sends with them, another reads with the client class, and back', async () => {
    const sent = leanHeaders();
    sent.set('Toolgate-Signer', 'gateway');
    sent.append('Dup', ' a ');
    sent.append('Dup', 'b');
    const viaClient = await received(`${t.prefix}.lean.one`, sent);
    // Read as the client reads it (its own class), then as the services read it.
    expect(viaClient.headers!.get('Toolgate-Signer')).toBe('gateway');
    expect(viaClient.headers!.values('Dup')).toEqual(['a', 'b']);

    const again = await received(`${t.prefix}.lean.two`, sent);
    const lean = headersOf(again)!;
    expect(lean).toBeInstanceOf(LeanHeaders);
    expect([...lean]).toEqual([...viaClient.headers!]);
    // Decoded once, kept where the client keeps its own.
    expect(again.headers).toBe(lean);
    expect(headersOf(again)).toBe(lean);
  });

  it('a message without headers has none; the broker’s no-responders status reads as the client reads it', async () => {
    expect(headersOf(await received(`${t.prefix}.lean.none`))).toBeUndefined();
    const inbox = createInbox();
    const sub = t.nc.subscribe(inbox, { max: 1 });
    t.nc.publish(`${t.prefix}.lean.nobody`, encoder.encode('x'), { reply: inbox });
    let status: Msg | undefined;
    for await (const m of sub) status = m;
    const lean = headersOf(status!)!;
    expect(lean).toBeInstanceOf(LeanHeaders);
    const client = MsgHdrsImpl.decode(
      (status as unknown as { _rdata: Uint8Array; _msg: { hdr: number } })._rdata.subarray(
        0,
        (status as unknown as { _msg: { hdr: number } })._msg.hdr,
      ),
    );
    expect(lean.code).toBe(503);
    expect([lean.code, lean.description, lean.status, lean.hasError]).toEqual([
      client.code,
      client.description,
      client.status,
      client.hasError,
    ]);
  });

  it('reads a JetStream message’s headers the same way (the consumer wraps the core message)', async () => {
    const js = jetstream(t.nc);
    const subject = t.subjects.journal.event('acme', 'run1', 'lean', 'requested');
    const h = clientHeaders();
    h.set('Toolgate-Test', 'stored');
    await js.publish(subject, encoder.encode('x'), { headers: h, msgID: 'lean-1' });
    await t.jsm.consumers.add(t.subjects.journal.stream, {
      name: 'lean',
      filter_subject: subject,
      ack_policy: AckPolicy.Explicit,
    });
    const consumer = await js.consumers.get(t.subjects.journal.stream, 'lean');
    const m = await consumer.next({ expires: 5000 });
    expect(m).not.toBeNull();
    const lean = headersOf(m!)!;
    expect(lean).toBeInstanceOf(LeanHeaders);
    expect(lean.get('Toolgate-Test')).toBe('stored');
    expect(lean.get('Nats-Msg-Id')).toBe('lean-1');
    expect(m!.headers).toBe(lean);
    m!.ack();
  });
});
