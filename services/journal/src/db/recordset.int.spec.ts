import { dispatchFixture, sequenced } from '../../test/fixtures/journal-events.fixture';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import { applyEvents } from '../projection/apply-event';
import { storableJson } from './recordset';

describe('storableJson', () => {
  it('leaves ordinary text, escaped backslashes and surrogate pairs as JSON.stringify writes them', () => {
    for (const value of [{ a: 'x', b: ['\\u0000 typed out', 'emoji \ud83d\ude00'] }, null, 'é']) {
      expect(storableJson(value)).toBe(JSON.stringify(value));
    }
  });

  it('puts U+FFFD in place of NUL and unpaired surrogates, in values and keys', () => {
    const value = { 'k\u0000': ['a\u0000b', '\ud800', 'x\udc00y', '\ud83d\ude00'] };
    expect(JSON.parse(storableJson(value))).toEqual({
      'k\uFFFD': ['a\uFFFDb', '\uFFFD', 'x\uFFFDy', '\ud83d\ude00'],
    });
  });
});

describe('the projection stores what PostgreSQL cannot parse as given', () => {
  let t: JournalTestDb;
  beforeAll(async () => {
    t = await useJournalDb('unstorable');
  });
  afterAll(() => t.cleanup());

  it('folds events whose strings hold NUL and unpaired surrogates instead of failing on them', async () => {
    const d = dispatchFixture({ dispatchId: 'nul1', input: { path: 'bin\u0000ary', '\ud800': 1 } });
    const events = [
      d.requested(0),
      d.decided(1, 'allow'),
      d.started(2),
      d.settled(3, 'ok', { result: { bytes: '\u0000\u0001\ud800' } }),
    ];
    const applied = await t.db.transaction().execute((trx) => applyEvents(trx, sequenced(events)));
    expect(applied).toBe(4);
    const row = await t.db
      .selectFrom('dispatches')
      .select(['status', 'input', 'result'])
      .executeTakeFirstOrThrow();
    expect(row).toEqual({
      status: 'settled',
      input: { path: 'bin\uFFFDary', '\uFFFD': 1 },
      result: { bytes: '\uFFFD\u0001\uFFFD' },
    });
  });
});
