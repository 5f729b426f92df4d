import { callEvents, testJournalKeys, useTestNats, type TestNats } from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';

/** The journal's growth is bounded by the retention its owner configures. */
describe('journal retention', () => {
  let t: TestNats;
  let publisher: JournalPublisher;

  beforeAll(async () => {
    t = await useTestNats('retention');
    // Created by another service first (no retention of its own), then brought to the owner's.
    await ensureJournalStreams(t.jsm, t.subjects);
    await ensureJournalStreams(t.jsm, t.subjects, {
      manage: true,
      maxAgeMs: 3 * 86_400_000,
      maxBytes: 64 * 1024,
    });
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(async () => {
    publisher?.close();
    await t?.cleanup();
  });

  it('holds the stream within its size bound under sustained appends, dropping the oldest', async () => {
    const { config } = await t.jsm.streams.info(t.subjects.journal.stream);
    expect({ maxAge: config.max_age, maxBytes: config.max_bytes }).toEqual({
      maxAge: 3 * 86_400_000 * 1e6,
      maxBytes: 64 * 1024,
    });
    for (let i = 0; i < 400; i++)
      await publisher.append(callEvents({ dispatchId: `d${i}` }).requested);
    const { state } = await t.jsm.streams.info(t.subjects.journal.stream);
    expect(state.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(state.first_seq).toBeGreaterThan(1);
    expect(state.last_seq).toBe(400);
    // The newest are there; the oldest are gone from the stream.
    expect(await publisher.last('acme', 'run-1', 'd399', 'requested')).not.toBeNull();
    expect(await publisher.last('acme', 'run-1', 'd0', 'requested')).toBeNull();
  });
});
