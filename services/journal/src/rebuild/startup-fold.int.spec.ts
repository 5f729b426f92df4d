import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { ensureJournalStreams } from '@toolgate/bus';
import type { JournalEvent } from '@toolgate/contracts';
import type { RunningService } from '@toolgate/service-kit';
import {
  eventually,
  publishSigned,
  testKeys,
  useTestNats,
  useTestSchema,
  type TestNats,
  type TestSchema,
} from '@toolgate/testing';
import { dispatchFixture } from '../../test/fixtures/journal-events.fixture';
import { testJournalConfig, untilAudited } from '../../test/journal-test-db';
import { startJournal } from '../journal.service';

const encoder = new TextEncoder();

/** Every event of one dispatch that was allowed, ran and settled ok. */
function okDispatch(dispatchId: string): JournalEvent[] {
  const d = dispatchFixture({ dispatchId, runId: 'run-1' });
  return [d.requested(0), d.decided(1, 'allow'), d.started(2), d.settled(3, 'ok', { result: 1 })];
}

/** The journal's `toolgate_untrusted_events_total` of one role, by reason, leaving out zeros. */
async function untrusted(journal: RunningService, role: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${journal.url}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const sample = /^toolgate_untrusted_events_total\{([^}]*)\} (\S+)$/.exec(line);
    if (!sample || !sample[1]!.includes(`role="${role}"`) || Number(sample[2]) === 0) continue;
    counts[/reason="([^"]+)"/.exec(sample[1]!)![1]!] = Number(sample[2]);
  }
  return counts;
}

describe('the start-up fold counts the untrusted messages it skips in /metrics', () => {
  let t: TestNats;
  let js: JetStreamClient;
  let first: TestSchema;
  let second: TestSchema;
  let journal: RunningService | undefined;
  const start = (schema: TestSchema) =>
    startJournal({ config: testJournalConfig(t.prefix, schema), logger: false });

  /** Publishes a `decided` of `dispatchId` nobody may have published, with the headers `sign` sets. */
  async function forge(
    dispatchId: string,
    sign?: (subject: string, payload: Uint8Array, h: MsgHdrs) => void,
  ) {
    const event = dispatchFixture({ dispatchId, runId: 'run-1' }).decided(1, 'allow');
    const subject = t.subjects.journal.event(event.tenant, event.runId, dispatchId, 'decided');
    const payload = encoder.encode(JSON.stringify(event));
    const h = natsHeaders();
    sign?.(subject, payload, h);
    await js.publish(subject, payload, { headers: h });
  }

  beforeAll(async () => {
    [t, first, second] = await Promise.all([
      useTestNats('sfold'),
      useTestSchema('sfold1'),
      useTestSchema('sfold2'),
    ]);
    js = jetstream(t.nc);
    await ensureJournalStreams(t.jsm, t.subjects);
  });
  afterAll(async () => {
    await journal?.stop();
    await Promise.all([t?.cleanup(), first?.cleanup(), second?.cleanup()]);
  });

  it('counts them under `fold`, and only those its consumer had passed', async () => {
    await publishSigned(js, t.subjects, okDispatch('genuine-1'));
    // Unsigned, as any client on an open broker can publish it.
    await forge('forged-unsigned');
    // Validly signed, by the gateway, which does not produce `decided`.
    await forge('forged-producer', (subject, payload, h) =>
      testKeys('gateway').signEvent(subject, 'requested', payload, h),
    );
    await publishSigned(js, t.subjects, okDispatch('genuine-2'));

    // The first journal's consumer is delivered all of it, and counts the forgeries itself.
    journal = await start(first);
    await untilAudited(first, 8);
    await eventually(async () =>
      (await untrusted(journal!, 'journal'))['wrong-producer'] === 1 ? true : undefined,
    );
    expect(await untrusted(journal, 'journal')).toEqual({ unsigned: 1, 'wrong-producer': 1 });
    await journal.stop();
    journal = undefined;

    // One more after it stopped: the next consumer delivers that one, not the fold.
    await forge('forged-later');

    // A new database over the same stream: the fold reads what the consumer passed, forgeries too.
    journal = await start(second);
    expect(await untrusted(journal, 'fold')).toEqual({ unsigned: 1, 'wrong-producer': 1 });
    await eventually(async () =>
      (await untrusted(journal!, 'journal')).unsigned === 1 ? true : undefined,
    );
    expect(await untrusted(journal, 'journal')).toEqual({ unsigned: 1 });
    expect(await untrusted(journal, 'fold')).toEqual({ unsigned: 1, 'wrong-producer': 1 });
  }, 60_000);
});
