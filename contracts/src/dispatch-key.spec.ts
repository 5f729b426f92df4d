import fc from 'fast-check';
import { deepShuffleKeys } from '../test/support/shuffle';
import { approvalKey, dispatchKey, inputDigest } from './dispatch-key';
import { NonSerializableValueError } from './errors';
import { isSubjectToken } from './subjects';

type Parts = Parameters<typeof dispatchKey>[0];
const partsArb: fc.Arbitrary<Parts> = fc.record({
  tenant: fc.string(),
  runId: fc.string(),
  callId: fc.string(),
  toolName: fc.string(),
  contractHash: fc.stringMatching(/^[0-9a-f]{64}$/),
  input: fc.jsonValue(),
});
const base: Parts = {
  tenant: 'acme',
  runId: 'run_1',
  callId: 'call_1',
  toolName: 'search_issues',
  contractHash: 'c'.repeat(64),
  input: { query: 'flaky', limit: 3 },
};

describe('dispatchKey', () => {
  it('is deterministic and a safe subject token', () => {
    fc.assert(
      fc.property(partsArb, (parts) => {
        const key = dispatchKey(parts);
        expect(key).toMatch(/^d[0-9a-f]{40}$/);
        expect(isSubjectToken(key)).toBe(true);
        expect(dispatchKey({ ...parts })).toBe(key);
      }),
    );
  });

  it('does not depend on the key order of the input', () => {
    fc.assert(
      fc.property(partsArb, fc.integer(), (parts, seed) => {
        expect(dispatchKey({ ...parts, input: deepShuffleKeys(parts.input, seed) })).toBe(
          dispatchKey(parts),
        );
      }),
    );
  });

  it.each(['tenant', 'runId', 'callId', 'toolName', 'contractHash'] as const)(
    'changes when %s changes',
    (field) => {
      fc.assert(
        fc.property(partsArb, fc.string(), (parts, other) => {
          fc.pre(other !== parts[field]);
          expect(dispatchKey({ ...parts, [field]: other })).not.toBe(dispatchKey(parts));
        }),
      );
    },
  );

  it('changes when the input changes', () => {
    fc.assert(
      fc.property(partsArb, fc.jsonValue(), (parts, input) => {
        fc.pre(JSON.stringify(input) !== JSON.stringify(parts.input));
        expect(dispatchKey({ ...parts, input })).not.toBe(dispatchKey(parts));
      }),
    );
  });

  it('keeps the parts apart: moving characters across a boundary changes the key', () => {
    expect(dispatchKey({ ...base, tenant: 'ab', runId: 'c' })).not.toBe(
      dispatchKey({ ...base, tenant: 'a', runId: 'bc' }),
    );
    expect(dispatchKey({ ...base, callId: '1', input: '2' })).not.toBe(
      dispatchKey({ ...base, callId: '12', input: '' }),
    );
  });

  it('refuses an input that is not JSON', () => {
    for (const input of [10n, () => 1, { at: new Date(0) }, NaN]) {
      expect(() => dispatchKey({ ...base, input })).toThrow(NonSerializableValueError);
    }
  });
});

describe('inputDigest and approvalKey', () => {
  it('digest the canonical input: key order never matters, content always does', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), fc.integer(), (a, b, seed) => {
        expect(inputDigest(deepShuffleKeys(a, seed))).toBe(inputDigest(a));
        expect(approvalKey('t', deepShuffleKeys(a, seed))).toBe(approvalKey('t', a));
        if (JSON.stringify(a) !== JSON.stringify(b)) {
          expect(inputDigest(a)).not.toBe(inputDigest(b));
          expect(approvalKey('t', a)).not.toBe(approvalKey('t', b));
        }
      }),
    );
  });

  it('bind an approval to the tool name as well as the input', () => {
    expect(approvalKey('write_file', { path: 'a' })).not.toBe(
      approvalKey('read_file', { path: 'a' }),
    );
    expect(approvalKey('write_file', { path: 'a' })).toMatch(/^[0-9a-f]{64}$/);
    expect(inputDigest({ path: 'a' })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('treat a missing input as null', () => {
    expect(inputDigest(undefined)).toBe(inputDigest(null));
    expect(approvalKey('t', undefined)).toBe(approvalKey('t', null));
  });
});
