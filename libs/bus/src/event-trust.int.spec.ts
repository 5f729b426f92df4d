import { headers as natsHeaders } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import {
  SignatureHeader,
  type DecidedEvent,
  type JournalEvent,
  type UntrustedReason,
} from '@toolgate/contracts';
import { callEvents, eventually, testKeys, useTestNats, type TestNats } from '@toolgate/testing';
import {
  ensureConsumer,
  ensureJournalStreams,
  JournalPublisher,
  runJournalConsumer,
  type BatchEntry,
  type PoisonReport,
} from './index';

const encoder = new TextEncoder();

function decided(dispatchId: string, tenant = 'acme'): DecidedEvent {
  return callEvents({ dispatchId, tenant, runId: 'run1' }).decided;
}

describe('journal readers refuse what its producer did not sign', () => {
  let t: TestNats;
  /** The evaluator's own publisher: what it appends is genuine. */
  let evaluator: JournalPublisher;
  /** The executor's reads. */
  let executor: JournalPublisher;
  /** What the executor's direct gets refused, as its metrics count it. */
  const refusedReads: UntrustedReason[] = [];

  beforeAll(async () => {
    t = await useTestNats('trust');
    await ensureJournalStreams(t.jsm, t.subjects);
    evaluator = new JournalPublisher(t.nc, t.subjects, testKeys('permission-evaluator'));
    executor = new JournalPublisher(t.nc, t.subjects, testKeys('tool-executor'), {
      onUntrusted: (reason) => refusedReads.push(reason),
    });
  });
  afterAll(async () => {
    evaluator?.close();
    executor?.close();
    await t?.cleanup();
  });

  /** Publishes `event` on `subject` with headers made by `sign` (none: unsigned). */
  async function raw(
    event: JournalEvent,
    sign?: (subject: string, payload: Uint8Array, h: ReturnType<typeof natsHeaders>) => void,
    subject = t.subjects.journal.event(event.tenant, event.runId, event.dispatchId, event.type),
  ) {
    const payload = encoder.encode(JSON.stringify(event));
    const h = natsHeaders();
    sign?.(subject, payload, h);
    await jetstream(t.nc).publish(subject, payload, { headers: h });
  }

  /** Six attacks on `decided`; `prefix` keeps each test's dispatches apart. */
  async function attacks(prefix: string) {
    // Unsigned, as any client on an open broker can publish it.
    await raw(decided(`${prefix}unsigned`));
    // The gateway's keys, claiming to be the evaluator.
    await raw(decided(`${prefix}claims`), (subject, payload, h) => {
      testKeys('gateway').signEvent(
        t.subjects.journal.event('acme', 'run1', `${prefix}claims`, 'requested'),
        'requested',
        payload,
        h,
      );
      h.set(SignatureHeader.Signer, 'permission-evaluator');
    });
    // A valid signature by the gateway, which does not produce `decided`.
    await raw(decided(`${prefix}wrong`), (subject, payload, h) =>
      testKeys('gateway').signEvent(subject, 'requested', payload, h),
    );
    // A genuine decision of tenant globex, replayed under acme's subject.
    const genuine = decided(`${prefix}replayed`, 'globex');
    const globexSubject = t.subjects.journal.event('globex', 'run1', genuine.dispatchId, 'decided');
    const sigs = natsHeaders();
    testKeys('permission-evaluator').signEvent(
      globexSubject,
      'decided',
      encoder.encode(JSON.stringify(genuine)),
      sigs,
    );
    await raw(
      genuine,
      (_s, _p, h) => {
        for (const [k, v] of sigs) for (const value of v) h.append(k, value);
      },
      t.subjects.journal.event('acme', 'run1', genuine.dispatchId, 'decided'),
    );
    // Signed by the evaluator, but a `requested` body on a `decided` subject.
    await raw(
      callEvents({ dispatchId: `${prefix}mismatch`, runId: 'run1' }).requested,
      (_s, payload, h) => {
        const subject = t.subjects.journal.event('acme', 'run1', `${prefix}mismatch`, 'decided');
        testKeys('permission-evaluator').signEvent(subject, 'decided', payload, h);
      },
      t.subjects.journal.event('acme', 'run1', `${prefix}mismatch`, 'decided'),
    );
    // And one genuine decision.
    await evaluator.append(decided(`${prefix}genuine`));
  }

  const REASONS: UntrustedReason[] = [
    'bad-signature',
    'bad-signature',
    'subject-mismatch',
    'unsigned',
    'wrong-producer',
  ];

  it.each([
    ['one at a time', false],
    ['in batches', true],
  ])(
    'a consumer (%s) hands over only the genuine event; the rest are dead-lettered, counted, never poison',
    async (_how, batched) => {
      const prefix = batched ? 'b-' : 'o-';
      const role = batched ? ('journal' as const) : ('executor' as const);
      const name = await ensureConsumer(t.jsm, t.subjects, {
        role,
        eventType: 'decided',
        maxDeliver: 3,
        ackWaitMs: 5000,
      });
      const handled: string[] = [];
      const poisoned: PoisonReport[] = [];
      const untrusted: UntrustedReason[] = [];
      const keys = testKeys(batched ? 'journal' : 'tool-executor');
      const running = runJournalConsumer({
        js: jetstream(t.nc),
        subjects: t.subjects,
        role,
        consumer: name,
        keys,
        async handle(event) {
          handled.push(event.dispatchId);
        },
        ...(batched
          ? {
              batch: {
                maxBatch: 16,
                lingerMs: 50,
                async handleBatch(entries: BatchEntry[]) {
                  for (const e of entries) handled.push(e.event.dispatchId);
                },
              },
            }
          : {}),
        async onPoison(report) {
          poisoned.push(report);
        },
        onUntrusted: (_role, reason) => untrusted.push(reason),
      });
      await running.ready;
      await attacks(prefix);
      // The batched consumer starts from the stream's start: it also sees the first case's attacks.
      const attacked = batched ? 10 : 5;
      await eventually(
        () =>
          untrusted.length === attacked && handled.includes(`${prefix}genuine`) ? true : undefined,
        {
          what: 'the refusals and the genuine event',
        },
      );
      await running.stop();
      expect(handled.filter((d) => d.startsWith(prefix))).toEqual([`${prefix}genuine`]);
      expect(poisoned).toEqual([]);
      expect([...untrusted].sort()).toEqual(batched ? REASONS.flatMap((r) => [r, r]) : REASONS);
      // Each refusal has its copy in the dead-letter stream, with the reason.
      const dead = await t.jsm.streams.getMessage(t.subjects.deadLetter.stream, {
        last_by_subj: t.subjects.deadLetter.forRole(role),
      });
      expect(dead?.header.get('Toolgate-Error-Code')).toBe('unauthorized');
      expect(REASONS).toContain(dead?.header.get('Toolgate-Untrusted'));
    },
  );

  it('a direct get reads a forged event as nothing recorded, and a genuine append supersedes it', async () => {
    const forged = decided('held');
    await raw(forged);
    refusedReads.length = 0;
    expect(await executor.last('acme', 'run1', 'held', 'decided')).toBeNull();
    expect(refusedReads).toEqual(['unsigned']);
    // The once-per-dispatch transition is not held by the forgery: the evaluator's decision lands.
    const result = await evaluator.append(forged);
    expect(result.appended).toBe(true);
    const read = await executor.last('acme', 'run1', 'held', 'decided');
    expect(read?.seq).toBe(result.seq);
    // ...and is itself once per dispatch.
    expect((await evaluator.append({ ...decided('held'), id: 'held:again' })).appended).toBe(false);
  });
});
