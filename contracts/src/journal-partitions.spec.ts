import { ConfigError } from './errors';
import {
  createSubjects,
  journalPartitionOf,
  MAX_JOURNAL_PARTITIONS,
  parseJournalSubject,
} from './subjects';
import { subjectMatches as matches } from '../test/support/subject-match';

const tenants = Array.from({ length: 40 }, (_, i) => `tenant-${i}`);

describe('an unpartitioned journal (the default)', () => {
  const before = createSubjects('tg');
  const one = createSubjects('tg', { journalPartitions: 1 });

  it('names exactly what it always named, with or without the setting', () => {
    for (const s of [before, one]) {
      const j = s.journal;
      expect(j.stream).toBe('tg_journal');
      expect(j.all).toBe('tg.journal.>');
      expect(j.event('acme', 'r1', 'd1', 'requested')).toBe('tg.journal.acme.r1.d1.requested');
      expect(j.forKey('acme', 'r1', 'd1')).toBe('tg.journal.acme.r1.d1.*');
      expect(j.forRun('acme', 'r1')).toBe('tg.journal.acme.r1.>');
      expect(j.forTenant('acme')).toBe('tg.journal.acme.>');
      expect(j.ofType('settled')).toBe('tg.journal.*.*.*.settled');
      expect(j.ofTypeIn('decided', 'acme', '*')).toBe('tg.journal.acme.*.*.decided');
      expect(j.matching('*', '*')).toBe('tg.journal.*.*.>');
      expect(j.keyOf('tg.journal.acme.r1.d1.settled')).toBe('acme.d1');
      expect(j.partitions).toEqual([
        expect.objectContaining({ index: 0, stream: 'tg_journal', all: 'tg.journal.>' }),
      ]);
      expect(j.partitions[0]!.ofType('settled')).toBe('tg.journal.*.*.*.settled');
      expect(j.partitionOf('anyone')).toBe(j.partitions[0]);
      expect(j.streamOf('tg.journal.acme.r1.d1.settled')).toBe('tg_journal');
    }
  });
});

describe('a journal of 4 partitions', () => {
  const s = createSubjects('tg', { journalPartitions: 4 });
  const j = s.journal;

  it('is 4 streams, each on subjects of its own', () => {
    expect(j.partitionCount).toBe(4);
    expect(j.partitions.map((p) => p.stream)).toEqual([
      'tg_journal_0',
      'tg_journal_1',
      'tg_journal_2',
      'tg_journal_3',
    ]);
    expect(j.partitions.map((p) => p.all)).toEqual([
      'tg.journal.0.>',
      'tg.journal.1.>',
      'tg.journal.2.>',
      'tg.journal.3.>',
    ]);
  });

  it("puts every subject of a tenant in its partition's stream, and in no other", () => {
    for (const tenant of tenants) {
      const mine = j.partitionOf(tenant);
      expect(mine.index).toBe(journalPartitionOf(tenant, 4));
      const subject = j.event(tenant, 'r1', 'd1', 'settled');
      expect(subject).toBe(`tg.journal.${mine.index}.${tenant}.r1.d1.settled`);
      expect(j.streamOf(subject)).toBe(mine.stream);
      for (const p of j.partitions) {
        expect(matches(p.all, subject)).toBe(p === mine);
        expect(matches(p.ofType('settled'), subject)).toBe(p === mine);
      }
      // The builders that name the tenant name its partition; the cross-partition ones match it.
      for (const filter of [
        j.forKey(tenant, 'r1', 'd1'),
        j.forRun(tenant, 'r1'),
        j.forTenant(tenant),
        j.ofTypeIn('settled', tenant, '*'),
        j.matching(tenant, 'r1'),
        j.matching('*', '*'),
        j.ofType('settled'),
        j.all,
      ])
        expect(matches(filter, subject)).toBe(true);
      expect(matches(j.forTenant(tenant), j.event(`${tenant}x`, 'r1', 'd1', 'settled'))).toBe(
        false,
      );
      expect(j.keyOf(subject)).toBe(`${tenant}.d1`);
      expect(parseJournalSubject(subject)).toEqual({
        tenant,
        runId: 'r1',
        key: 'd1',
        type: 'settled',
      });
    }
  });

  it('refuses to name one stream for the whole journal (a ConfigError, not partition 0)', () => {
    expect(() => j.stream).toThrow(ConfigError);
    expect(() => j.streamOf('tg.api.whoami')).toThrow(ConfigError);
  });

  it('spreads tenants over the partitions', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[journalPartitionOf(`t${i}`, 4)]!++;
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });
});

describe('journalPartitionOf', () => {
  it('is FNV-1a (32-bit) of the tenant, modulo the count', () => {
    // Published FNV-1a 32 vectors: "a" → 0xe40c292c, "foobar" → 0xbf9cf968.
    expect(journalPartitionOf('a', 1_000_000_007)).toBe(0xe40c292c % 1_000_000_007);
    expect(journalPartitionOf('foobar', 1_000_000_007)).toBe(0xbf9cf968 % 1_000_000_007);
    expect(journalPartitionOf('foobar', 4)).toBe(0xbf9cf968 % 4);
  });

  it('refuses what is not a tenant', () => {
    expect(() => journalPartitionOf('a.b', 4)).toThrow(ConfigError);
  });
});

describe('the partition count', () => {
  it.each([0, -1, 1.5, Number.NaN, MAX_JOURNAL_PARTITIONS + 1])('refuses %p', (n) => {
    expect(() => createSubjects('tg', { journalPartitions: n })).toThrow(ConfigError);
  });
});
