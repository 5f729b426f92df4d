import { z } from 'zod';
import { canonicalJson } from './canonical-json';
import {
  JOURNAL_EVENT_TYPES,
  JOURNAL_UPCASTERS,
  RequestedEventSchema,
  ToolRefSchema,
  upcastJournalEvent,
  type JournalUpcaster,
  JOURNAL_SCHEMA_VERSION,
  journalEvent,
  type NewJournalEvent,
  ONCE_PER_DISPATCH,
  decodeJournalEvent,
  parseJournalEvent,
} from './events';
import { createSubjects, isSubjectToken } from './subjects';
import { samples, tool } from '../test/support/journal-event-samples';

describe('journal events', () => {
  it('lists every event type, and the ones the broker allows once per dispatch', () => {
    expect([...JOURNAL_EVENT_TYPES].sort()).toEqual(Object.keys(samples).sort());
    expect([...ONCE_PER_DISPATCH].sort()).toEqual(
      ['decided', 'requested', 'resolved', 'settled', 'suspended'].sort(),
    );
    expect(ONCE_PER_DISPATCH.has('started')).toBe(false); // one per attempt
    for (const type of ONCE_PER_DISPATCH) expect(JOURNAL_EVENT_TYPES).toContain(type);
    // An event type is the last token of its subject.
    for (const type of JOURNAL_EVENT_TYPES) expect(isSubjectToken(type)).toBe(true);
  });

  it.each(Object.entries(samples))(
    '%s: builds, completes the envelope and parses back',
    (type, sample) => {
      const event = journalEvent(sample as NewJournalEvent);
      expect(event.type).toBe(type);
      expect(event.schemaVersion).toBe(JOURNAL_SCHEMA_VERSION);
      expect(event).toMatchObject(sample);
      // What a consumer reads off the wire parses to the same event.
      const wire = JSON.parse(canonicalJson(event)) as unknown;
      expect(parseJournalEvent(wire)).toEqual(event);
      // ...and it has a subject under the journal grammar.
      const subjects = createSubjects('tg');
      expect(subjects.journal.event(event.tenant, event.runId, event.dispatchId, event.type)).toBe(
        `tg.journal.acme.${event.runId}.${event.dispatchId}.${type}`,
      );
    },
  );

  it('fills in defaults a publisher may leave out', () => {
    const requested = journalEvent(samples.requested);
    expect(requested.retryDepth).toBe(0);
    expect(journalEvent(samples.decided).advisory).toEqual([]);
    expect(journalEvent(samples.suspended).separationOfDuties).toBe(false);
  });

  it.each<[string, Record<string, unknown>]>([
    ['an unknown type', { ...samples.started, type: 'exploded' }],
    ['a missing envelope field', { ...samples.requested, tenant: undefined }],
    ['a tenant that is not a subject token', { ...samples.requested, tenant: 'a.b' }],
    ['a run id with a wildcard', { ...samples.requested, runId: '*' }],
    ['a dispatch id with a space', { ...samples.requested, dispatchId: 'd 1' }],
    ['a time that is not ISO 8601', { ...samples.requested, at: 'yesterday' }],
    ['a time without an offset', { ...samples.requested, at: '2025-01-02T03:04:05' }],
    ['an illegal tool name', { ...samples.started, toolName: 'a.b' }],
    [
      'a contract hash that is not sha256 hex',
      { ...samples.requested, tool: { ...tool, contractHash: 'C'.repeat(64) } },
    ],
    ['an unknown error code', { ...samples.settled, error: { code: 'oops', message: 'x' } }],
    ['an unknown verdict', { ...samples.decided, verdict: 'maybe' }],
    ['attempt 0 on started', { ...samples.started, attempt: 0 }],
    ['a negative duration', { ...samples.settled, durationMs: -1 }],
  ])('refuses %s', (_what, malformed) => {
    expect(() => journalEvent(malformed as unknown as NewJournalEvent)).toThrow();
    expect(parseJournalEvent({ ...malformed, schemaVersion: JOURNAL_SCHEMA_VERSION })).toBeNull();
  });

  it('parseJournalEvent returns null on garbage, never throws', () => {
    const valid = journalEvent(samples.settled);
    const garbage: unknown[] = [
      null,
      undefined,
      42,
      'settled',
      JSON.stringify(valid),
      [],
      [valid],
      {},
      { type: 'requested' },
      { ...valid, schemaVersion: JOURNAL_SCHEMA_VERSION + 1 }, // from a newer release
      { ...valid, schemaVersion: 0 },
      { ...valid, schemaVersion: 1.5 },
      { ...valid, schemaVersion: '1' },
      { ...valid, schemaVersion: undefined },
      Object.assign(Object.create({ type: 'settled' }) as object, { id: 'x' }),
    ];
    for (const g of garbage) expect(parseJournalEvent(g)).toBeNull();
  });

  it('decodeJournalEvent reads a message body: the event, or null for non-JSON and non-events', () => {
    const valid = journalEvent(samples.settled);
    const bytes = (text: string) => new TextEncoder().encode(text);
    expect(decodeJournalEvent(bytes(JSON.stringify(valid)))).toEqual(valid);
    expect(decodeJournalEvent(bytes('{"type":'))).toBeNull();
    expect(decodeJournalEvent(new Uint8Array([0xff, 0xfe, 0x00]))).toBeNull();
    expect(decodeJournalEvent(bytes(JSON.stringify({ ...valid, outcome: 'maybe' })))).toBeNull();
  });

  it('takes schemaVersion from the library, not from the publisher', () => {
    const event = journalEvent({ ...samples.started, schemaVersion: 99 } as NewJournalEvent);
    expect(event.schemaVersion).toBe(JOURNAL_SCHEMA_VERSION);
  });
});

/** `value` with `extra` added to every object in it, at every depth (arrays' items included). */
function withUnknownFieldsEverywhere(value: unknown, extra: Record<string, unknown>): unknown {
  if (Array.isArray(value)) return value.map((item) => withUnknownFieldsEverywhere(item, extra));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = { ...extra };
  for (const [k, v] of Object.entries(value)) {
    // `input`, `result` and `rule` are free JSON: whatever is in them is data, kept as it is.
    out[k] = ['input', 'result', 'rule', 'details'].includes(k)
      ? v
      : withUnknownFieldsEverywhere(v, extra);
  }
  return out;
}

describe('journal events evolve', () => {
  it.each(Object.entries(samples))(
    '%s: a reader ignores fields it does not know, at every depth; the writer refuses them',
    (_type, sample) => {
      const event = journalEvent(sample as NewJournalEvent);
      const newer = withUnknownFieldsEverywhere(event, { addedInV1_1: { nested: [1, 2] } });
      expect(parseJournalEvent(newer)).toEqual(event);
      expect(() => journalEvent(newer as NewJournalEvent)).toThrow();
    },
  );

  it('an old consumer reads an event from a newer publisher that added optional fields', () => {
    // The next release's writer: one optional field on the event and one on its tool.
    const NextToolRef = ToolRefSchema.extend({ region: z.string().optional() });
    const NextRequested = RequestedEventSchema.extend({
      costCentre: z.string().optional(),
      tool: NextToolRef,
    });
    const next = NextRequested.parse({
      ...samples.requested,
      schemaVersion: JOURNAL_SCHEMA_VERSION,
      costCentre: 'cc-42',
      tool: { ...tool, region: 'eu-west-1' },
    });
    const wire = new TextEncoder().encode(JSON.stringify(next));

    // Today's reader folds it as the event it knows...
    const read = decodeJournalEvent(wire);
    expect(read).toEqual(journalEvent(samples.requested));
    expect(read).not.toHaveProperty('costCentre');
    // ...and what it read can go into events it writes itself (the evaluator copies `tool`).
    expect(() =>
      journalEvent({ ...samples.decided, tool: (read as { tool: typeof tool }).tool }),
    ).not.toThrow();
  });

  it('the reader keeps everything else of the writer: defaults, formats, enums', () => {
    const event = journalEvent(samples.requested);
    const { retryDepth: _omitted, ...withoutDefault } = event;
    expect(parseJournalEvent(withoutDefault)).toMatchObject({ retryDepth: 0 });
    expect(parseJournalEvent({ ...event, at: 'yesterday', extra: 1 })).toBeNull();
    expect(parseJournalEvent({ ...event, isolation: { kind: 'cloud', extra: 1 } })).toBeNull();
  });

  it('every version before today has its upcaster (the chain has no gap)', () => {
    for (let v = 1; v < JOURNAL_SCHEMA_VERSION; v++) expect(JOURNAL_UPCASTERS[v]).toBeDefined();
    expect(JOURNAL_UPCASTERS[JOURNAL_SCHEMA_VERSION]).toBeUndefined();
  });

  describe('upcastJournalEvent', () => {
    // A pretend history: v2 renamed `who` to `by`, v3 added a required `source`.
    const chain: Record<number, JournalUpcaster> = {
      1: ({ who, ...rest }) => ({ ...rest, by: who, schemaVersion: 2 }),
      2: (event) => ({ ...event, source: 'human', schemaVersion: 3 }),
    };

    it('runs an old event through every step to today', () => {
      expect(upcastJournalEvent({ schemaVersion: 1, type: 'x', who: 'bob' }, chain, 3)).toEqual({
        schemaVersion: 3,
        type: 'x',
        by: 'bob',
        source: 'human',
      });
      expect(upcastJournalEvent({ schemaVersion: 2, by: 'ann' }, chain, 3)).toEqual({
        schemaVersion: 3,
        by: 'ann',
        source: 'human',
      });
    });

    it('leaves a current event as it is', () => {
      const event = { schemaVersion: 3, by: 'ann', source: 'timeout' };
      expect(upcastJournalEvent(event, chain, 3)).toBe(event);
    });

    it('refuses a version from the future, a gap in the chain and an upcaster that lies', () => {
      expect(upcastJournalEvent({ schemaVersion: 4 }, chain, 3)).toBeNull();
      expect(upcastJournalEvent({ schemaVersion: 1, who: 'x' }, { 2: chain[2]! }, 3)).toBeNull();
      const lying: Record<number, JournalUpcaster> = { 1: (e) => ({ ...e }) };
      expect(upcastJournalEvent({ schemaVersion: 1 }, lying, 2)).toBeNull();
    });
  });
});
