import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { ErrorCode, SignatureHeader, type DecidedEvent } from '@toolgate/contracts';
import { callEvents, reForger, testKeys, useTestNats, type TestNats } from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';
import { SUPERSEDE_ATTEMPTS } from './journal-publisher';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function decided(dispatchId: string): DecidedEvent {
  return callEvents({ dispatchId, tenant: 'acme', runId: 'run1' }).decided;
}

/**
 * Forged once-per-dispatch events, as any client on an open broker can publish them, against the
 * evaluator's appends of `decided`: a forgery never holds the transition, and one that keeps coming
 * back costs an append a bounded number of publishes.
 */
describe('a once-per-dispatch append over forged events', () => {
  let t: TestNats;
  /** The evaluator's own publisher: what it appends is genuine. */
  let evaluator: JournalPublisher;
  /** The executor's reads. */
  let executor: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('supersede');
    await ensureJournalStreams(t.jsm, t.subjects);
    evaluator = new JournalPublisher(t.nc, t.subjects, testKeys('permission-evaluator'));
    executor = new JournalPublisher(t.nc, t.subjects, testKeys('tool-executor'));
  });
  afterAll(async () => {
    evaluator?.close();
    executor?.close();
    await t?.cleanup();
  });

  const subjectOf = (e: DecidedEvent) =>
    t.subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type);

  /** Publishes `event` unsigned on its subject (`msgID`: as its `Nats-Msg-Id`); its sequence. */
  async function forge(event: DecidedEvent, msgID?: string): Promise<number> {
    const ack = await jetstream(t.nc).publish(
      subjectOf(event),
      encoder.encode(JSON.stringify(event)),
      { headers: natsHeaders(), ...(msgID ? { msgID } : {}) },
    );
    return ack.seq;
  }

  /**
   * Counts the signed messages published on `event`'s subject from now on — the appends' publishes,
   * whether the broker took them or refused them — as a core subscription sees them.
   */
  async function countPublishes(event: DecidedEvent) {
    let signed = 0;
    const sub = t.nc.subscribe(subjectOf(event), {
      callback: (_err, msg) => {
        if (msg.headers?.has(SignatureHeader.Sigs)) signed += 1;
      },
    });
    await t.nc.flush();
    return {
      /** The count, once everything published before now has reached the subscription. */
      async signed() {
        await t.nc.flush();
        return signed;
      },
      stop: () => sub.unsubscribe(),
    };
  }

  it('appends after one forgery: the genuine event wins, and readers see it', async () => {
    const event = decided('forged-first');
    const forgedSeq = await forge(event);
    const publishes = await countPublishes(event);
    const result = await evaluator.append(event);
    expect(result).toEqual({ appended: true, seq: expect.any(Number), duplicate: false });
    expect(result.seq).toBeGreaterThan(forgedSeq);
    // The first publish expected an empty subject; the second a compare-and-set on the forgery.
    expect(await publishes.signed()).toBe(2);
    publishes.stop();
    const read = await executor.last('acme', 'run1', 'forged-first', 'decided');
    expect(read?.seq).toBe(result.seq);
    expect(read?.event).toEqual(event);
  });

  it('appends after a forgery that took the event’s id, instead of taking it for a retry of its own', async () => {
    // Once-per-dispatch ids are predictable (`<dispatchId>:decided`): the broker deduplicates the
    // genuine append against a forgery published first under the same `Nats-Msg-Id`.
    const event = decided('id-taken');
    const forgedSeq = await forge(event, event.id);
    const result = await evaluator.append(event);
    expect(result).toEqual({ appended: true, seq: expect.any(Number), duplicate: false });
    expect(result.seq).toBeGreaterThan(forgedSeq);
    const read = await executor.last('acme', 'run1', 'id-taken', 'decided');
    expect(read?.seq).toBe(result.seq);
    // A retry of the same append (an ack that was lost) is a duplicate of the genuine one.
    expect(await evaluator.append(event)).toEqual({
      appended: true,
      seq: result.seq,
      duplicate: true,
    });
  });

  it('keeps a genuine event that a forgery was published after: readers see it, and no second one gets in', async () => {
    const event = decided('forged-after');
    const genuine = await evaluator.append(event);
    expect(genuine.appended).toBe(true);
    await forge(event);
    const read = await executor.last('acme', 'run1', 'forged-after', 'decided');
    expect(read?.seq).toBe(genuine.seq);
    // Another genuine decision (a replica's, after the dedupe window): the transition is taken.
    expect(await evaluator.append({ ...event, id: 'forged-after:again' })).toEqual({
      appended: false,
    });
    expect((await executor.last('acme', 'run1', 'forged-after', 'decided'))?.seq).toBe(genuine.seq);
  });

  it("reads the recorded transition, not a race's refused loser replayed after it", async () => {
    // Two genuine decisions race; the broker records the first. The loser's publish still reaches
    // every subscriber, signature and all: an open broker's client publishes it again, without the
    // expectation, and the stream takes it.
    const first = decided('replayed-loser');
    const loser: DecidedEvent = { ...first, id: 'replayed-loser:loser', verdict: 'deny' };
    const heard: { data: Uint8Array; headers: MsgHdrs }[] = [];
    const sub = t.nc.subscribe(subjectOf(first), {
      callback: (_err, msg) => {
        if (msg.headers) heard.push({ data: msg.data, headers: msg.headers });
      },
    });
    await t.nc.flush();
    const recorded = await evaluator.append(first);
    expect(await evaluator.append(loser)).toEqual({ appended: false });
    await t.nc.flush();
    sub.unsubscribe();
    const refused = heard.find((h) => JSON.parse(decoder.decode(h.data)).id === loser.id)!;
    const replay = natsHeaders();
    for (const [name, values] of refused.headers)
      if (!name.startsWith('Nats-')) for (const v of values) replay.append(name, v);
    const replayed = await jetstream(t.nc).publish(subjectOf(first), refused.data, {
      headers: replay,
      msgID: 'a-fresh-id',
    });
    expect(replayed.seq).toBeGreaterThan(recorded.seq!);
    const read = await executor.last('acme', 'run1', 'replayed-loser', 'decided');
    expect(read?.seq).toBe(recorded.seq);
    expect(read?.event).toEqual(first);
  });

  it(`against an attacker that re-forges on every lookup: gives up after ${SUPERSEDE_ATTEMPTS} publishes with a retryable unavailable, and a later append wins`, async () => {
    const event = decided('re-forged');
    // Each time an append reads the subject's last message to append after it, a new forgery
    // lands first (the evaluator behind a slow link): the compare-and-set names a sequence that is
    // no longer the last.
    const forger = await reForger(t, subjectOf(event));
    try {
      const slowNc = await forger.victim();
      const slow = new JournalPublisher(slowNc, t.subjects, testKeys('permission-evaluator'));
      const publishes = await countPublishes(event);
      let timer: NodeJS.Timeout | undefined;
      let result: unknown;
      try {
        result = await Promise.race([
          slow.append(event).then(
            (appended) => appended,
            (err: unknown) => err,
          ),
          new Promise<'still looping'>((resolve) => {
            timer = setTimeout(() => resolve('still looping'), 10_000);
          }),
        ]);
      } finally {
        clearTimeout(timer);
        forger.stop();
      }
      expect(result).toMatchObject({
        code: ErrorCode.Unavailable,
        details: { dispatchId: 're-forged', retryable: true },
      });
      expect(await publishes.signed()).toBe(SUPERSEDE_ATTEMPTS);
      expect(forger.forgeries()).toBe(SUPERSEDE_ATTEMPTS);
      // Nothing genuine is recorded: the executor reads no decision.
      expect(await executor.last('acme', 'run1', 're-forged', 'decided')).toBeNull();
      // The attacker gone, the caller's next try (a redelivery) appends after the forgeries.
      const retried = await slow.append(event);
      expect(retried.appended).toBe(true);
      expect((await executor.last('acme', 'run1', 're-forged', 'decided'))?.seq).toBe(retried.seq);
      expect(await publishes.signed()).toBe(SUPERSEDE_ATTEMPTS + 2);
      publishes.stop();
    } finally {
      await forger.close();
    }
  });
});
