import { z } from 'zod';
import { tolerantReader } from './tolerant-reader';

describe('tolerantReader', () => {
  const Point = z.strictObject({ x: z.number(), y: z.number().default(0) });
  const Writer = z.strictObject({
    kind: z.literal('shape'),
    at: Point,
    path: z.array(Point),
    anchor: Point.optional(),
    origin: Point.nullable(),
    labels: z.record(z.string(), z.strictObject({ text: z.string().min(1) })),
    variant: z.discriminatedUnion('t', [
      z.strictObject({ t: z.literal('a'), a: Point }),
      z.strictObject({ t: z.literal('b'), b: z.string() }),
    ]),
    either: z.union([z.literal('none'), z.strictObject({ ref: z.string() })]),
    pair: z.tuple([Point, Point]),
    checked: z
      .strictObject({ lo: z.number(), hi: z.number() })
      .refine((r) => r.lo <= r.hi, 'lo must not exceed hi'),
  });
  const Reader = tolerantReader(Writer);

  const value = {
    kind: 'shape' as const,
    at: { x: 1, y: 2 },
    path: [{ x: 3, y: 4 }],
    anchor: { x: 5, y: 6 },
    origin: { x: 7, y: 8 },
    labels: { k: { text: 'hi' } },
    variant: { t: 'a' as const, a: { x: 9, y: 10 } },
    either: { ref: 'r' },
    pair: [
      { x: 1, y: 1 },
      { x: 2, y: 2 },
    ] as [{ x: number; y: number }, { x: number; y: number }],
    checked: { lo: 1, hi: 2 },
  };
  const extra = { z: 'unknown' };
  const withExtras = {
    ...value,
    ...extra,
    at: { ...value.at, ...extra },
    path: [{ ...value.path[0], ...extra }],
    anchor: { ...value.anchor, ...extra },
    origin: { ...value.origin, ...extra },
    labels: { k: { ...value.labels.k, ...extra } },
    variant: { ...value.variant, ...extra, a: { ...value.variant.a, ...extra } },
    either: { ...value.either, ...extra },
    pair: [
      { ...value.pair[0], ...extra },
      { ...value.pair[1], ...extra },
    ],
    checked: { ...value.checked, ...extra },
  };

  it('drops unknown keys at every depth and kind of nesting, where the writer refuses them', () => {
    expect(Writer.safeParse(withExtras).success).toBe(false);
    expect(Reader.parse(withExtras)).toEqual(Writer.parse(value));
  });

  it('leaves the writer as it was', () => {
    expect(Writer.safeParse({ ...value, extra: 1 }).success).toBe(false);
    expect(Writer.parse(value)).toEqual(value);
  });

  it('keeps types, defaults, literals, formats and refinements', () => {
    expect(Reader.parse({ ...withExtras, at: { x: 1 } }).at).toEqual({ x: 1, y: 0 });
    for (const bad of [
      { ...withExtras, kind: 'circle' },
      { ...withExtras, at: { x: '1' } },
      { ...withExtras, labels: { k: { text: '' } } },
      { ...withExtras, variant: { t: 'c' } },
      { ...withExtras, either: 'some' },
      { ...withExtras, pair: [value.pair[0]] },
      { ...withExtras, checked: { lo: 3, hi: 2, z: 1 } },
    ]) {
      expect(Reader.safeParse(bad).success).toBe(false);
    }
  });

  it('keeps a loose catchall as it is', () => {
    const Loose = tolerantReader(z.looseObject({ a: z.strictObject({ b: z.number() }) }));
    expect(Loose.parse({ a: { b: 1, c: 2 }, d: 3 })).toEqual({ a: { b: 1 }, d: 3 });
  });

  it('refuses what it cannot walk rather than leave it strict', () => {
    expect(() => tolerantReader(z.lazy(() => Point))).toThrow(/lazy/);
  });
});
