import fc from 'fast-check';
import {
  headers as clientHeaders,
  Match,
  MsgHdrsImpl,
  type MsgHdrs,
} from '@nats-io/transport-node';
import { LeanHeaders, leanHeaders } from './lean-headers';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** What a reader can see of headers: status, and every name with its values, in order. */
function seen(h: MsgHdrs) {
  return {
    code: h.code,
    description: h.description,
    status: h.status,
    hasError: h.hasError,
    entries: [...h].map(([k, v]) => [k, [...v]]),
  };
}

/** Runs `fn` and says what it threw (the client's error message), or what it returned. */
function outcome<T>(fn: () => T): { threw: string } | { value: T } {
  try {
    return { value: fn() };
  } catch (err) {
    return { threw: (err as Error).message };
  }
}

// Names from the printable range (valid) with a few that are not (space, colon, control bytes),
// cased variants of each other, and values with blanks around them and line breaks inside.
const name = fc.oneof(
  fc.constantFrom('Nats-Msg-Id', 'nats-msg-id', 'Toolgate-Sigs', 'traceparent', 'X', 'a-b-c'),
  fc.string({
    minLength: 1,
    maxLength: 8,
    unit: fc.constantFrom('a', 'B', '-', '1', ':', ' ', '\t', 'é'),
  }),
);
const value = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom(' padded ', 'a\r\nb', 'a\nb', 'x\ry', '', 'v2 journal=abc gateway=def'),
);
const match = fc.constantFrom(Match.Exact, Match.CanonicalMIME, Match.IgnoreCase, undefined);
const op = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), name, value, match }),
  fc.record({ kind: fc.constant('append' as const), name, value, match }),
  fc.record({ kind: fc.constant('delete' as const), name, match }),
);
const query = fc.record({
  kind: fc.constantFrom('get', 'last', 'has', 'values'),
  name,
  match,
});

describe('LeanHeaders', () => {
  it('answers, refuses and encodes every sequence of edits exactly as the client class does', () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 12 }),
        fc.array(query, { maxLength: 6 }),
        (ops, queries) => {
          const lean = leanHeaders();
          const client = clientHeaders();
          for (const o of ops) {
            const apply = (h: MsgHdrs) =>
              o.kind === 'delete' ? h.delete(o.name, o.match) : h[o.kind](o.name, o.value, o.match);
            expect(outcome(() => apply(lean))).toEqual(outcome(() => apply(client)));
            expect(seen(lean)).toEqual(seen(client));
          }
          for (const q of queries)
            expect(outcome(() => lean[q.kind](q.name, q.match))).toEqual(
              outcome(() => client[q.kind](q.name, q.match)),
            );
          expect(decoder.decode(lean.encode())).toBe(
            decoder.decode((client as MsgHdrsImpl).encode()),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('decodes every header block as the client does: status, names, values, order, errors', () => {
    const line = fc.oneof(
      fc.tuple(name, value).map(([k, v]) => `${k}:${v}`),
      fc.tuple(name, value).map(([k, v]) => `${k}: ${v}`),
      fc.constantFrom('', 'no colon here', ':empty name', 'Dup: 1', 'dup: 2', 'Dup: 3'),
      fc.string({ maxLength: 10 }),
    );
    const status = fc.constantFrom(
      'NATS/1.0',
      'NATS/1.0 503',
      'NATS/1.0 404 No Messages',
      'NATS/1.0 408 Request Timeout',
      'NATS/1.0 100 Idle Heartbeat',
      'NATS/1.0 abc',
      'NATS/1.0  409   Consumer Deleted ',
      'garbage',
    );
    fc.assert(
      fc.property(
        status,
        fc.array(line, { maxLength: 8 }),
        fc.boolean(),
        (first, lines, trailer) => {
          const block = encoder.encode(
            [first, ...lines].join('\r\n') + (trailer ? '\r\n\r\n' : ''),
          );
          const lean = outcome(() => seen(LeanHeaders.decode(block)));
          const client = outcome(() => seen(MsgHdrsImpl.decode(block)));
          expect(lean).toEqual(client);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('reads back what it encoded, through the client decoder and its own', () => {
    const h = leanHeaders();
    h.set('Toolgate-Signer', 'gateway');
    h.set('Toolgate-Sigs', 'v2 journal=abc tool-executor=def');
    h.append('Dup', '1');
    h.append('Dup', '2');
    for (const decode of [MsgHdrsImpl.decode, LeanHeaders.decode]) {
      const back = decode(h.encode());
      expect(back.get('Toolgate-Sigs')).toBe('v2 journal=abc tool-executor=def');
      expect(back.values('Dup')).toEqual(['1', '2']);
      expect(back.last('Dup')).toBe('2');
    }
  });

  it('refuses a value that would break the header block (a line break), with the client error', () => {
    const h = leanHeaders();
    expect(() => h.set('Nats-Msg-Id', 'id\r\nNats-Expected-Last-Subject-Sequence: 7')).toThrow(
      /cannot contain/,
    );
    expect(() => h.set('Bad Name', 'x')).toThrow(/not a valid character/);
    expect(h.has('Nats-Msg-Id')).toBe(false);
    expect(decoder.decode(h.encode())).toBe('');
  });
});
