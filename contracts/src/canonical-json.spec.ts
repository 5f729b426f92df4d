import fc from 'fast-check';
import { canonicalDigest, canonicalJson, isJsonValue, sha256Hex } from './canonical-json';
import { ErrorCode, hasErrorCode, NonSerializableValueError } from './errors';
import { deepShuffleKeys } from '../test/support/shuffle';

/** The IEEE 754 double whose bits are the 16 hex digits `hex`. */
function double(hex: string): number {
  return Buffer.from(hex, 'hex').readDoubleBE(0);
}

describe('canonicalJson (RFC 8785)', () => {
  // RFC 8785, Appendix B: IEEE 754 bit patterns and their canonical text.
  const numberVectors: [string, string][] = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'], // -0
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ];

  it.each(numberVectors)('serialises the double 0x%s as %s', (bits, text) => {
    expect(canonicalJson(double(bits))).toBe(text);
  });

  it('serialises numbers in their shortest round-tripping form', () => {
    expect(canonicalJson(1e21)).toBe('1e+21');
    expect(canonicalJson(1e20)).toBe('100000000000000000000');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson(0.1 + 0.2)).toBe('0.30000000000000004');
    expect(canonicalJson(4.5)).toBe('4.5');
    expect(canonicalJson(2e-3)).toBe('0.002');
    expect(canonicalJson(1e-7)).toBe('1e-7');
  });

  it('reproduces the RFC 8785 section 3.2.2 example byte for byte', () => {
    const input = JSON.parse(String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`) as unknown;
    expect(canonicalJson(input)).toBe(
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
    );
  });

  it('orders keys by UTF-16 code units, not code points (RFC 8785 section 3.2.3)', () => {
    const input = JSON.parse(String.raw`{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }`) as Record<string, string>;
    // Object.keys would list the index-like key "1" first whatever the text says, so read the
    // order off the serialised text.
    const text = canonicalJson(input);
    const positions = [
      'Carriage Return',
      'One',
      'Control',
      'Latin Small Letter O With Diaeresis',
      'Euro Sign',
      'Emoji: Grinning Face',
      'Hebrew Letter Dalet With Dagesh',
    ].map((v) => text.indexOf(v));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
  });

  it('writes no insignificant whitespace and escapes only what JSON requires', () => {
    expect(canonicalJson({ b: [1, { d: 'x y', c: null }], a: '\u2028é' })).toBe(
      '{"a":"\u2028é","b":[1,{"c":null,"d":"x y"}]}',
    );
    expect(canonicalJson('\u0000\u001f"\\')).toBe('"\\u0000\\u001f\\"\\\\"');
  });

  it('does not depend on key order, however deeply keys are shuffled', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (value, seed) => {
        expect(canonicalJson(deepShuffleKeys(value, seed))).toBe(canonicalJson(value));
      }),
    );
  });

  it('round-trips: parsing the canonical form gives back an equal value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
        // -0 has no JSON spelling; everything else survives exactly.
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it('drops object members whose value is undefined, as JSON does', () => {
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
  });

  it('accepts objects without a prototype and shared (acyclic) references', () => {
    const bare = Object.assign(Object.create(null) as object, { z: 1, a: 2 });
    expect(canonicalJson(bare)).toBe('{"a":2,"z":1}');
    const shared = { x: 1 };
    expect(canonicalJson([shared, { again: shared }])).toBe('[{"x":1},{"again":{"x":1}}]');
  });

  class Point {
    constructor(
      readonly x: number,
      readonly y: number,
    ) {}
  }
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = { back: cyclic };
  const cyclicArray: unknown[] = [1];
  cyclicArray.push(cyclicArray);

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['undefined in an array', [1, undefined]],
    ['a function', () => 1],
    ['a nested function', { a: { f: function named() {} } }],
    ['a symbol', Symbol('s')],
    ['a bigint', 10n],
    ['a nested bigint', { n: [1n] }],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity in an object', { x: -Infinity }],
    ['a cycle through an object', cyclic],
    ['a cycle through an array', cyclicArray],
    ['a class instance', new Point(1, 2)],
    ['a Date (it has toJSON, but is not plain JSON)', new Date(0)],
    ['a Map', new Map([['a', 1]])],
    ['a boxed string', new String('s')],
  ])('refuses %s with a NonSerializableValueError', (_what, value) => {
    let caught: unknown;
    try {
      canonicalJson(value);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(NonSerializableValueError);
    expect(hasErrorCode(caught, ErrorCode.NonSerializableResult)).toBe(true);
    expect(isJsonValue(value)).toBe(false);
  });

  it('names where the offending value sits', () => {
    expect(() => canonicalJson({ a: [0, { b: NaN }] })).toThrow('$.a[1].b');
    expect(() => canonicalJson(cyclic)).toThrow(/cycle at \$\.self\.back/);
  });

  it('isJsonValue accepts what canonicalJson accepts', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => expect(isJsonValue(value)).toBe(true)));
  });

  it('digests are sha256 of the canonical UTF-8 text, in lowercase hex', () => {
    // sha256("abc") from FIPS 180-2.
    expect(sha256Hex('abc')).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(canonicalDigest({ b: 1, a: 'é' })).toBe(sha256Hex('{"a":"é","b":1}'));
    expect(canonicalDigest({ b: 1, a: 'é' })).toMatch(/^[0-9a-f]{64}$/);
  });
});
