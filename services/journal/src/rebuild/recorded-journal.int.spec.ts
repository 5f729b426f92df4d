import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { JOURNAL_EVENT_TYPES, parseJournalEvent } from '@toolgate/contracts';
import { useJournalDb, type JournalTestDb } from '../../test/journal-db';
import type { JournalEntry } from '../projection/apply-event';
import { projectionSnapshot } from './compare-projections';
import { rebuildProjection } from './rebuild-projection';

/**
 * Journals recorded from released versions (`npm run record:journal`, see
 * `test/src/journal-fixture/record-journal.ts`) must still be read and folded by today's code into
 * the projection the services made of them when they were recorded. A change to an event schema,
 * an upcaster or a fold that breaks an old journal fails here.
 */
const DIR = path.join(__dirname, '../../test/fixtures/recorded');
const STREAM = 'toolgate_journal';
const recordings = readdirSync(DIR)
  .filter((name) => name.endsWith('.jsonl'))
  .sort();

interface RecordedLine {
  seq: number;
  subject: string;
  event: Record<string, unknown>;
}

function load(name: string): RecordedLine[] {
  return readFileSync(path.join(DIR, name), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as RecordedLine);
}

function entries(lines: readonly RecordedLine[], map = (e: unknown) => e): JournalEntry[] {
  return lines.map(({ seq, event }) => {
    const parsed = parseJournalEvent(map(event));
    if (!parsed) throw new Error(`seq ${seq} no longer parses: ${JSON.stringify(event)}`);
    return { event: parsed, seq, stream: STREAM };
  });
}

async function* iterate<T>(items: readonly T[]): AsyncGenerator<T> {
  yield* items;
}

/** `value` with one more field on every object, at every depth: what a newer release might add. */
function withFieldsFromTheFuture(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withFieldsFromTheFuture);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = { addedLater: { by: 'a newer release' } };
  for (const [k, v] of Object.entries(value)) {
    // Free JSON (tool input and results, rules, error details) is data: it is kept as it is.
    out[k] = ['input', 'result', 'rule', 'details', 'advisory'].includes(k)
      ? v
      : withFieldsFromTheFuture(v);
  }
  return out;
}

describe('recorded journals', () => {
  let t: JournalTestDb;
  beforeAll(async () => {
    t = await useJournalDb('recorded');
  });
  afterAll(() => t.cleanup());

  it('there is at least one, and together they hold every event type', () => {
    expect(recordings.length).toBeGreaterThan(0);
    const types = new Set(recordings.flatMap((name) => load(name).map((l) => l.event.type)));
    expect([...types].sort()).toEqual([...JOURNAL_EVENT_TYPES].sort());
  });

  it.each(recordings)('%s: every event parses with today’s reader', (name) => {
    const lines = load(name);
    expect(entries(lines)).toHaveLength(lines.length);
  });

  it.each(recordings)(
    '%s: today’s fold gives the projection recorded with it',
    async (name) => {
      const expected = JSON.parse(
        readFileSync(path.join(DIR, name.replace(/\.jsonl$/, '.projection.json')), 'utf8'),
      ) as unknown;
      const result = await rebuildProjection(t.db, iterate(entries(load(name))));
      expect(result.duplicates).toBe(0);
      expect(await projectionSnapshot(t.db)).toEqual(expected);
    },
    60_000,
  );

  it.each(recordings)(
    '%s: with a field from a newer release on every object, the fold is the same',
    async (name) => {
      const lines = load(name);
      await rebuildProjection(t.db, iterate(entries(lines)));
      const today = await projectionSnapshot(t.db);
      await rebuildProjection(t.db, iterate(entries(lines, withFieldsFromTheFuture)));
      expect(await projectionSnapshot(t.db)).toEqual(today);
    },
    60_000,
  );
});
