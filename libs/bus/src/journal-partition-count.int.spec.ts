import { ConfigError, createSubjects } from '@toolgate/contracts';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { ensureJournalStreams } from './journal-infrastructure';

/**
 * A journal's partition count is fixed when it is created: a service told another count would look
 * for a tenant's history (and a resubmitted call) in the wrong stream, or write it there. Each
 * partition's stream says its place and the count, and a service of another count is refused
 * before it creates or changes anything.
 */
describe('the partition count of a journal', () => {
  let nats: TestNats;

  beforeAll(async () => {
    nats = await useTestNats('partcount');
  });
  afterAll(() => nats?.cleanup());

  const journalStreams = async () => {
    const names: string[] = [];
    for await (const name of nats.jsm.streams.names())
      if (name.startsWith(`${nats.prefix}_journal`)) names.push(name);
    return names.sort();
  };
  const partitioned = (n: number) => createSubjects(nats.prefix, { journalPartitions: n });

  it('is kept by the services that agree on it, and refused to any other count', async () => {
    await ensureJournalStreams(nats.jsm, partitioned(4), { manage: true });
    // Again, as every replica of every service does at start-up.
    await ensureJournalStreams(nats.jsm, partitioned(4), { manage: true });
    await ensureJournalStreams(nats.jsm, partitioned(4));
    const four = await journalStreams();
    expect(four).toEqual(partitioned(4).journal.partitions.map((p) => p.stream));
    expect((await nats.jsm.streams.info(four[3]!)).config.description).toBe(
      'toolgate journal partition 3 of 4',
    );

    for (const n of [2, 8]) {
      for (const manage of [true, false]) {
        const refused = await ensureJournalStreams(nats.jsm, partitioned(n), { manage }).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(refused).toBeInstanceOf(ConfigError);
        expect((refused as ConfigError).message).toMatch(
          /is "toolgate journal partition 0 of 4", but this service is configured for \d partitions/,
        );
      }
    }
    // Nothing made or changed for the other counts.
    expect(await journalStreams()).toEqual(four);
    expect((await nats.jsm.streams.info(four[0]!)).config.description).toBe(
      'toolgate journal partition 0 of 4',
    );
    // An unpartitioned service's stream would capture every partition's subjects: the broker
    // refuses it (overlapping subjects), so it cannot start beside them either.
    await expect(ensureJournalStreams(nats.jsm, createSubjects(nats.prefix))).rejects.toThrow(
      /overlap/,
    );
    expect(await journalStreams()).toEqual(four);
  });

  it('cannot be made partitioned beside an unpartitioned journal', async () => {
    const prefix = `${nats.prefix}u`;
    await ensureJournalStreams(nats.jsm, createSubjects(prefix), { manage: true });
    await expect(
      ensureJournalStreams(nats.jsm, createSubjects(prefix, { journalPartitions: 4 }), {
        manage: true,
      }),
    ).rejects.toThrow(/overlap/);
    const names: string[] = [];
    for await (const name of nats.jsm.streams.names())
      if (name.startsWith(`${prefix}_journal`)) names.push(name);
    expect(names).toEqual([`${prefix}_journal`]);
  });
});
