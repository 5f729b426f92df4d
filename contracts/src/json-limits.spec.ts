import fc from 'fast-check';
import { z } from 'zod';
import { SubmitDispatchRequestSchema, PutPolicyRequestSchema } from './api';
import { CANONICAL_JSON_MAX_DEPTH, canonicalJson, isJsonValue } from './canonical-json';
import { approvalKey, dispatchKey } from './dispatch-key';
import { ErrorCode, hasErrorCode } from './errors';
import {
  findForbiddenKey,
  MAX_JSON_DEPTH,
  mergeableJson,
  boundedJson,
  withinJsonDepth,
} from './json-limits';
import { ToolContractSchema } from './tool-contract';

/** `levels` objects (or arrays) nested in one another around `leaf`. */
function nested(levels: number, leaf: unknown = 1, kind: 'object' | 'array' = 'object'): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = kind === 'object' ? { a: value } : [value];
  return value;
}

describe('withinJsonDepth', () => {
  it('counts levels of objects and arrays; scalars are level 0', () => {
    expect(withinJsonDepth('x', 0)).toBe(true);
    expect(withinJsonDepth({}, 0)).toBe(false);
    expect(withinJsonDepth({}, 1)).toBe(true);
    expect(withinJsonDepth({ a: [1] }, 1)).toBe(false);
    expect(withinJsonDepth({ a: [1] }, 2)).toBe(true);
  });

  it(`lets ${MAX_JSON_DEPTH} levels in by default and refuses one more`, () => {
    expect(withinJsonDepth(nested(MAX_JSON_DEPTH))).toBe(true);
    expect(withinJsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(false);
    expect(withinJsonDepth(nested(MAX_JSON_DEPTH + 1, 1, 'array'))).toBe(false);
  });

  it('answers for any depth without overflowing the stack', () => {
    expect(withinJsonDepth(nested(100_000, 1, 'array'))).toBe(false);
    expect(withinJsonDepth(nested(100_000), 1_000_000)).toBe(true);
  });

  it('agrees with the depth a value was built with (property)', () => {
    fc.assert(
      fc.property(fc.nat(150), fc.nat(150), fc.boolean(), (levels, max, arrays) => {
        const value = nested(levels, 'leaf', arrays ? 'array' : 'object');
        expect(withinJsonDepth(value, max)).toBe(levels <= max);
      }),
    );
  });
});

describe('findForbiddenKey', () => {
  it.each([
    ['{"__proto__":{"x":1}}', ['__proto__']],
    ['{"a":[{"b":1},{"constructor":{}}]}', ['a', 1, 'constructor']],
    ['{"engine":{"deny":[{"prototype":1}]}}', ['engine', 'deny', 0, 'prototype']],
  ])('finds the key in %s', (text, path) => {
    expect(findForbiddenKey(JSON.parse(text))).toEqual(path);
  });

  it('finds nothing in ordinary JSON, values named like the keys included', () => {
    expect(findForbiddenKey(JSON.parse('{"a":["__proto__","constructor"],"b":null}'))).toBe(
      undefined,
    );
    expect(findForbiddenKey('__proto__')).toBeUndefined();
  });

  it('walks any depth without overflowing the stack', () => {
    expect(findForbiddenKey(nested(50_000, JSON.parse('{"__proto__":1}')))).toHaveLength(50_001);
  });
});

describe('edge schemas', () => {
  const call = { runId: 'r', callId: 'c', agent: { agentType: 'a' }, tool: 't' };

  it(`a dispatch's input nests at most ${MAX_JSON_DEPTH} levels`, () => {
    expect(
      SubmitDispatchRequestSchema.safeParse({ ...call, input: nested(MAX_JSON_DEPTH) }),
    ).toMatchObject({
      success: true,
    });
    const deep = SubmitDispatchRequestSchema.safeParse({ ...call, input: nested(3000) });
    expect(deep.success).toBe(false);
    expect(deep.error?.issues).toEqual([
      expect.objectContaining({
        path: ['input'],
        message: expect.stringContaining('deeper than 100'),
      }),
    ]);
  });

  it('a policy document with __proto__, constructor or prototype anywhere is refused', () => {
    for (const text of [
      '{"document":{"__proto__":{"engine":{"deny":[{"tool":"shell"}]}}}}',
      '{"document":{"profiles":{"constructor":{}}}}',
      '{"document":{"engine":{"riskOverrides":{"prototype":"read"}}}}',
    ]) {
      const parsed = PutPolicyRequestSchema.safeParse(JSON.parse(text));
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path[0]).toBe('document');
    }
    expect(PutPolicyRequestSchema.safeParse({ document: { engine: {} } }).success).toBe(true);
  });

  it('a tool contract whose parameters name such a key is refused', () => {
    const contract = {
      name: 't',
      description: 'd',
      parameters: JSON.parse('{"type":"object","properties":{"constructor":{"type":"string"}}}'),
    };
    expect(ToolContractSchema.safeParse(contract).success).toBe(false);
  });

  it('keeps the wrapped schema: types, JSON Schema and errors', () => {
    const schema = mergeableJson(z.record(z.string(), z.number()));
    expect(schema.parse({ a: 1 })).toEqual({ a: 1 });
    expect(schema.safeParse({ a: 'x' }).success).toBe(false);
    expect(z.toJSONSchema(schema, { io: 'input' })).toMatchObject({ type: 'object' });
    expect(z.toJSONSchema(boundedJson(z.string()), { io: 'input' })).toMatchObject({
      type: 'string',
    });
  });
});

describe('canonical JSON depth', () => {
  it(`takes ${CANONICAL_JSON_MAX_DEPTH} levels and refuses deeper with a typed error, never a stack overflow`, () => {
    expect(() => canonicalJson(nested(CANONICAL_JSON_MAX_DEPTH))).not.toThrow();
    for (const levels of [CANONICAL_JSON_MAX_DEPTH + 1, 3000, 100_000]) {
      let thrown: unknown;
      try {
        canonicalJson(nested(levels, 1, 'array'));
      } catch (err) {
        thrown = err;
      }
      expect(hasErrorCode(thrown, ErrorCode.NonSerializableResult)).toBe(true);
      expect(isJsonValue(nested(levels))).toBe(false);
    }
  });

  it('hashes every input an edge lets in, inside the arrays the keys wrap it in', () => {
    const input = nested(MAX_JSON_DEPTH, 1, 'array');
    expect(
      dispatchKey({
        tenant: 't',
        runId: 'r',
        callId: 'c',
        toolName: 'x',
        contractHash: 'c'.repeat(64),
        input,
      }),
    ).toMatch(/^d[0-9a-f]+$/);
    expect(approvalKey('x', input)).toMatch(/^[0-9a-f]{64}$/);
  });
});
