import fc from 'fast-check';
import { z } from 'zod';
import {
  JOURNAL_EVENT_TYPES,
  JOURNAL_SCHEMA_VERSION,
  JournalEventSchema,
  journalEvent,
  parseJournalEvent,
  upcastJournalEvent,
  type JournalEventType,
  type NewJournalEvent,
} from './events';
import { tolerantReader } from './tolerant-reader';
import { samples } from '../test/support/journal-event-samples';

/*
 * `journalEvent` and `parseJournalEvent` parse with zod's compiled parsers of the event schemas.
 * The oracle here is the same schemas run by zod's interpreter, uncompiled: over events of every
 * type, valid and mutated, both must accept and refuse the same values, return the same value
 * (keys and their order included) and throw the same issues.
 */
const interpretedWriter = JournalEventSchema;
const interpretedReader = tolerantReader(JournalEventSchema);

type Path = readonly (string | number)[];
type Container = Record<string | number, unknown>;

const isObject = (v: unknown): v is Container =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every path to a value in `v`, parents before children, in key order. */
function pathsOf(v: unknown, prefix: Path = []): Path[] {
  const out: Path[] = [];
  const entries: [string | number, unknown][] = Array.isArray(v)
    ? v.map((x, i) => [i, x])
    : isObject(v)
      ? Object.keys(v).map((k) => [k, v[k]])
      : [];
  for (const [k, x] of entries) out.push([...prefix, k], ...pathsOf(x, [...prefix, k]));
  return out;
}

const at = (root: unknown, path: Path): unknown =>
  path.reduce<unknown>((c, k) => (c as Container)[k], root);

/**
 * `v` written out path by path (keys in their order), with the kind and value at each: equal for
 * two values only when they are the same to any reader. (`toStrictEqual` would also do, but calls
 * a value with a `constructor: NaN` key, which the events' free JSON may hold, unequal to itself.)
 */
const dump = (v: unknown): string[] =>
  [[], ...pathsOf(v)].map((path) => {
    const x = at(v, path);
    const what =
      x === null
        ? 'null'
        : Array.isArray(x)
          ? 'array'
          : typeof x === 'object'
            ? Object.getPrototypeOf(x) === Object.prototype
              ? 'object'
              : 'object with another prototype'
            : Object.is(x, -0)
              ? 'number -0'
              : `${typeof x} ${typeof x === 'string' ? JSON.stringify(x) : String(x)}`;
    return `${path.join('.')}: ${what}`;
  });

/** Sets an own, enumerable key even when it is `__proto__`, as `JSON.parse` does. */
function setOwn(target: Container, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

const seeds = JOURNAL_EVENT_TYPES.map((type) => samples[type] as Record<string, unknown>);

/** Values a field of this name holds in some sample, and more a field of that name may hold. */
const valuesByKey = new Map<string, unknown[]>();
const remember = (key: string, value: unknown) =>
  valuesByKey.set(key, [...(valuesByKey.get(key) ?? []), value]);
for (const seed of seeds)
  for (const path of pathsOf(seed)) {
    const key = path[path.length - 1];
    if (typeof key === 'string') remember(key, at(seed, path));
  }
const times = [
  '2025-01-02T03:04:05Z',
  '2025-01-02T03:04:05.1+05:30',
  '2025-12-31T23:59:59.999-08:00',
];
const tokens = ['A-z_0', 'a'.repeat(128)];
for (const [key, values] of Object.entries({
  at: times,
  expiresAt: times,
  causationId: [null, 'e-x', 'x'.repeat(256)],
  id: ['x'.repeat(256), 'ü'],
  tenant: tokens,
  runId: tokens,
  dispatchId: tokens,
  worktreeId: tokens,
  retryOf: tokens,
  settledDispatchId: tokens,
  profile: ['', 'p'.repeat(128)],
  label: ['', '😀'.repeat(128)],
  timeoutMs: [1, 2 ** 31],
  clearance: ['public', 'private'],
  taint: ['internal'],
  retryDepth: [0, 5],
  rule: [null, { any: [1] }, 'x'],
  input: [null, 0, 'x', [1], { a: { b: [] } }],
  result: [null, { rows: [] }, 7],
  advisory: [[], [{ x: 1 }, 'a']],
  isolation: ['none', 'readonly', { kind: 'worktree' }],
  error: [{ code: 'timeout', message: '', details: { a: 1 } }],
  durationMs: [0, 0.5, 1e9],
  attempt: [0, 7],
  recent: [[], ['a', 'b']],
  files: [[], [{ path: 'x', status: 'untracked', binary: true }]],
  separationOfDuties: [true],
}))
  for (const value of values) remember(key, value);
const knownKeys = [...valuesByKey.keys()];

/** Near misses and the wrong kinds of value: what a broken or hostile publisher writes. */
const oddValues: unknown[] = [
  undefined,
  null,
  true,
  0,
  -0,
  -1,
  1.5,
  2 ** 53,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  '',
  '1',
  'a.b',
  '*',
  'yesterday',
  '2025-01-02T03:04:05',
  '2025-01-02 03:04:05Z',
  'A'.repeat(64),
  'a'.repeat(63),
  '0'.repeat(40),
  'x'.repeat(257),
  'x'.repeat(2049),
  '😀'.repeat(129),
  '\u0000',
  '\ud800',
  [],
  [null],
  {},
  { kind: 'cloud' },
];

const mutation = fc.record({
  kind: fc.constantFrom('set', 'set', 'delete', 'add', 'retype'),
  at: fc.nat(),
  /** Take the value from what a field of that name holds (often valid), or an odd one. */
  likeKey: fc.boolean(),
  pick: fc.nat(),
  odd: fc.oneof(
    { arbitrary: fc.constantFrom(...oddValues), weight: 3 },
    { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 1 },
  ),
  key: fc.oneof(
    fc.constantFrom(...knownKeys, 'extra', '__proto__', 'constructor', 'toString', ''),
    fc.string({ maxLength: 3 }),
  ),
  type: fc.constantFrom(...JOURNAL_EVENT_TYPES),
});
type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

function mutate(event: Record<string, unknown>, m: Mutation): void {
  if (m.kind === 'retype') {
    event.type = m.type;
    return;
  }
  const paths = pathsOf(event);
  if (m.kind === 'add') {
    const objects = [[], ...paths].filter((p) => isObject(at(event, p)));
    const target = at(event, objects[m.at % objects.length]!) as Container;
    setOwn(target, m.key, structuredClone(m.odd));
    return;
  }
  const path = paths[m.at % paths.length]!;
  const parent = at(event, path.slice(0, -1)) as Container;
  const key = path[path.length - 1]!;
  if (m.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key];
    return;
  }
  const like = typeof key === 'string' ? valuesByKey.get(key) : undefined;
  setOwn(parent, key, structuredClone(m.likeKey && like ? like[m.pick % like.length] : m.odd));
}

/**
 * An event of each type, mutated, as an own object, through JSON, or inherited: as a publisher
 * builds it (`journalEvent` sets the version), or as read from the wire (with its version).
 */
const candidate = (onTheWire: boolean) =>
  fc
    .record({
      type: fc.constantFrom(...JOURNAL_EVENT_TYPES),
      mutations: fc.array(mutation, { maxLength: 3 }),
      form: fc.constantFrom('own', 'json', 'inherited'),
    })
    .map(({ type, mutations, form }) => {
      const event = structuredClone({
        ...samples[type],
        ...(onTheWire ? { schemaVersion: JOURNAL_SCHEMA_VERSION } : {}),
      }) as Record<string, unknown>;
      for (const m of mutations) mutate(event, m);
      const value: unknown =
        form === 'json'
          ? JSON.parse(JSON.stringify(event))
          : form === 'inherited'
            ? Object.create(event)
            : event;
      return { type, value };
    });

function expectSameValue(actual: unknown, expected: unknown): void {
  expect(dump(actual)).toEqual(dump(expected));
}

/** Counts what the oracle accepted per type, so a run that generated no valid events fails. */
function tally() {
  const accepted = new Map<JournalEventType, number>();
  let refused = 0;
  return {
    add(type: JournalEventType, ok: boolean) {
      if (ok) accepted.set(type, (accepted.get(type) ?? 0) + 1);
      else refused++;
    },
    expectBoth() {
      for (const type of JOURNAL_EVENT_TYPES) expect(accepted.get(type) ?? 0).toBeGreaterThan(10);
      expect(refused).toBeGreaterThan(1000);
    },
  };
}

describe('compiled event parsers', () => {
  it('compile (a schema zod cannot compile would be parsed by its interpreter, slowly)', () => {
    expect(() => z.compile(interpretedWriter, { strict: true })).not.toThrow();
    expect(() => z.compile(interpretedReader, { strict: true })).not.toThrow();
  });

  it('journalEvent accepts, completes and refuses exactly what the interpreted writer does', () => {
    const seen = tally();
    fc.assert(
      fc.property(candidate(false), ({ type, value }) => {
        const input = value as Record<string, unknown>;
        const expected = interpretedWriter.safeParse({
          ...input,
          schemaVersion: JOURNAL_SCHEMA_VERSION,
        });
        seen.add(type, expected.success);
        let thrown: unknown;
        let actual: unknown;
        try {
          actual = journalEvent(input as NewJournalEvent);
        } catch (err) {
          thrown = err;
        }
        if (expected.success) {
          expect(thrown).toBeUndefined();
          expectSameValue(actual, expected.data);
        } else {
          expect(thrown).toBeInstanceOf(z.ZodError);
          expect((thrown as z.ZodError).issues).toEqual(expected.error.issues);
        }
      }),
      { numRuns: 3000 },
    );
    seen.expectBoth();
  });

  it('parseJournalEvent reads and refuses exactly what the interpreted reader does', () => {
    const seen = tally();
    fc.assert(
      fc.property(candidate(true), ({ type, value }) => {
        const upcast = upcastJournalEvent(value);
        const expected = upcast ? interpretedReader.safeParse(upcast) : undefined;
        seen.add(type, expected?.success === true);
        expectSameValue(parseJournalEvent(value), expected?.success ? expected.data : null);
      }),
      { numRuns: 3000 },
    );
    seen.expectBoth();
  });
});
