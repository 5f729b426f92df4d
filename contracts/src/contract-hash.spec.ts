import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { configError } from '../test/support/config-error';
import { deepShuffleKeys } from '../test/support/shuffle';
import { assertUniqueToolNames, contractHash, toolsetHash } from './contract-hash';
import { ConfigError } from './errors';
import type { ToolContract } from './tool-contract';

const toolName = fc.stringMatching(/^[a-zA-Z0-9_-]{1,64}$/);
const parameters = fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 6 });
const contractArb: fc.Arbitrary<ToolContract> = fc.record(
  {
    name: toolName,
    description: fc.string({ minLength: 1 }),
    parameters,
    version: fc.string(),
  },
  { requiredKeys: ['name', 'description', 'parameters'] },
);
/** A toolset: contracts with pairwise distinct names. */
const toolsetArb = fc.uniqueArray(contractArb, { selector: (c) => c.name, maxLength: 8 });

const policyArb = fc.record({
  risk: fc.constantFrom('read', 'write', 'network', 'execute', 'destructive'),
  needsApproval: fc.boolean(),
  executor: fc.constantFrom('inprocess', 'subprocess', 'remote', 'script', 'container'),
});

const search: ToolContract = {
  name: 'search_issues',
  description: 'Search the issue tracker and return the top matches.',
  parameters: {
    type: 'object',
    properties: { query: { type: 'string' }, limit: { type: 'integer', default: 10 } },
    required: ['query'],
  },
  version: '2',
};

describe('contractHash', () => {
  it('is sha256 over the canonical JSON tuple (name, description, parameters, version)', () => {
    const text =
      '["search_issues","Search the issue tracker and return the top matches.",' +
      '{"properties":{"limit":{"default":10,"type":"integer"},"query":{"type":"string"}},' +
      '"required":["query"],"type":"object"},"2"]';
    expect(contractHash(search)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
    expect(contractHash(search)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not depend on key order anywhere in the contract', () => {
    fc.assert(
      fc.property(contractArb, fc.integer(), (contract, seed) => {
        expect(contractHash(deepShuffleKeys(contract, seed))).toBe(contractHash(contract));
      }),
    );
  });

  it('changes when the description changes', () => {
    fc.assert(
      fc.property(contractArb, fc.string({ minLength: 1 }), (contract, description) => {
        fc.pre(description !== contract.description);
        expect(contractHash({ ...contract, description })).not.toBe(contractHash(contract));
      }),
    );
  });

  it('changes when the parameters schema changes', () => {
    fc.assert(
      fc.property(contractArb, fc.string(), fc.jsonValue(), (contract, key, value) => {
        const parameters = { ...contract.parameters, [key]: value };
        fc.pre(JSON.stringify(parameters) !== JSON.stringify(contract.parameters));
        expect(contractHash({ ...contract, parameters })).not.toBe(contractHash(contract));
      }),
    );
    const loosened = {
      ...search,
      parameters: { ...search.parameters, required: [] },
    };
    expect(contractHash(loosened)).not.toBe(contractHash(search));
  });

  it('changes when the version changes', () => {
    fc.assert(
      fc.property(contractArb, fc.string(), (contract, version) => {
        fc.pre(version !== contract.version);
        expect(contractHash({ ...contract, version })).not.toBe(contractHash(contract));
      }),
    );
  });

  it('keeps an absent version absent: it differs from every present version, "" included', () => {
    const { version: _dropped, ...unversioned } = search;
    const absent = contractHash(unversioned);
    expect(contractHash({ ...unversioned, version: undefined })).toBe(absent);
    expect(contractHash({ ...unversioned, version: '' })).not.toBe(absent);
    expect(contractHash({ ...unversioned, version: 'undefined' })).not.toBe(absent);
    fc.assert(
      fc.property(fc.string(), (version) => {
        expect(contractHash({ ...unversioned, version })).not.toBe(absent);
      }),
    );
    // Nothing is synthesised: the hashed tuple has three elements.
    const text =
      '["search_issues","Search the issue tracker and return the top matches.",' +
      '{"properties":{"limit":{"default":10,"type":"integer"},"query":{"type":"string"}},' +
      '"required":["query"],"type":"object"}]';
    expect(absent).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
  });

  it('ignores policy fields and the implementation', () => {
    fc.assert(
      fc.property(contractArb, policyArb, fc.anything(), (contract, policy, extra) => {
        const registered = {
          ...contract,
          ...policy,
          policy,
          extra,
          execute: async (input: unknown) => ({ echoed: input, at: Math.random() }),
        };
        expect(contractHash(registered)).toBe(contractHash(contract));
      }),
    );
  });

  it.each(['', 'a'.repeat(65), 'a.b', 'a b', 'tool*', 'wérk', 'naïve', '工具', 'a\n', 'a/b'])(
    'refuses the illegal tool name %j with a ConfigError',
    (name) => {
      configError(() => contractHash({ ...search, name }));
      configError(() => toolsetHash([{ ...search, name }]));
    },
  );

  it('accepts names of 1 to 64 characters of [a-zA-Z0-9_-]', () => {
    for (const name of ['a', 'A'.repeat(64), 'search_issues', 'deploy-service', '0_-Z']) {
      expect(contractHash({ ...search, name })).toMatch(/^[0-9a-f]{64}$/);
    }
  });
});

describe('toolsetHash', () => {
  it('is sha256 over the canonical JSON array of tuples sorted by name', () => {
    const b: ToolContract = { name: 'b', description: 'B', parameters: { type: 'object' } };
    const a: ToolContract = {
      name: 'a',
      description: 'A',
      parameters: { type: 'object', properties: {} },
      version: '2',
    };
    const text = '[["a","A",{"properties":{},"type":"object"},"2"],["b","B",{"type":"object"}]]';
    expect(toolsetHash([b, a])).toBe(createHash('sha256').update(text).digest('hex'));
    expect(toolsetHash([])).toBe(createHash('sha256').update('[]').digest('hex'));
  });

  it('does not depend on the order of the tools or of their keys', () => {
    fc.assert(
      fc.property(
        toolsetArb.chain((set) =>
          fc.tuple(fc.constant(set), fc.shuffledSubarray(set, { minLength: set.length })),
        ),
        fc.integer(),
        ([set, reordered], seed) => {
          expect(toolsetHash(deepShuffleKeys(reordered, seed))).toBe(toolsetHash(set));
        },
      ),
    );
  });

  it('changes when any one tool changes its contract', () => {
    fc.assert(
      fc.property(
        toolsetArb.filter((s) => s.length > 0),
        fc.nat(),
        fc.string({ minLength: 1 }),
        (set, pick, description) => {
          const i = pick % set.length;
          fc.pre(set[i]!.description !== description);
          const changed = set.map((c, j) => (j === i ? { ...c, description } : c));
          expect(toolsetHash(changed)).not.toBe(toolsetHash(set));
        },
      ),
    );
  });

  it('changes when a tool is added or removed', () => {
    fc.assert(
      fc.property(
        toolsetArb.filter((s) => s.length > 0),
        (set) => {
          expect(toolsetHash(set.slice(1))).not.toBe(toolsetHash(set));
        },
      ),
    );
  });

  it('ignores policy fields and implementations of every tool', () => {
    fc.assert(
      fc.property(toolsetArb, fc.array(policyArb), (set, policies) => {
        const registered = set.map((c, i) => ({
          ...c,
          policy: policies[i % Math.max(policies.length, 1)],
          execute: () => i,
        }));
        expect(toolsetHash(registered)).toBe(toolsetHash(set));
      }),
    );
  });

  it('refuses two tools with one name with a ConfigError naming every duplicate', () => {
    const err = configError(() =>
      toolsetHash([
        search,
        { ...search, description: 'other' },
        { name: 'solo', description: 'x', parameters: {} },
        { name: 'twice', description: 'x', parameters: {} },
        { name: 'twice', description: 'y', parameters: {} },
      ]),
    );
    expect(err.message).toContain('search_issues');
    expect(err.message).toContain('twice');
    expect(err.message).not.toContain('solo');
    expect(err.details).toEqual({ duplicates: ['search_issues', 'twice'] });
  });

  it('finds duplicates however the toolset is ordered, even identical contracts', () => {
    fc.assert(
      fc.property(
        toolsetArb.filter((s) => s.length > 0),
        fc.nat(),
        (set, pick) => {
          const dup = set[pick % set.length]!;
          expect(() => toolsetHash([...set, dup])).toThrow(ConfigError);
          expect(() => assertUniqueToolNames([dup, ...set])).toThrow(dup.name);
        },
      ),
    );
    expect(() => assertUniqueToolNames([{ name: 'a' }, { name: 'b' }])).not.toThrow();
  });
});
