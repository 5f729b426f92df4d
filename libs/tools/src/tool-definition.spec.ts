import { z } from 'zod';
import { ConfigError, contractHash, ErrorCode, type StandardSchemaV1 } from '@toolgate/contracts';
import { tool } from './tool-definition';

function configErrorOf(define: () => unknown): ConfigError {
  try {
    define();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(ErrorCode.Config);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError at definition time');
}

const searchIssues = {
  name: 'search_issues',
  description: 'Search the issue tracker and return the top matches.',
  parameters: z.object({ query: z.string(), limit: z.number().int().default(10) }),
  execute: ({ query }: { query: string }) => [`match for ${query}`],
};

describe('tool(): definition-time checks', () => {
  it.each([
    ['a space', 'search issues'],
    ['a dot', 'search.issues'],
    ['an empty name', ''],
    ['65 characters', 'a'.repeat(65)],
  ])('refuses a name with %s', (_what, name) => {
    const err = configErrorOf(() => tool({ ...searchIssues, name }));
    expect(err.message).toContain('name');
  });

  it.each<[string, unknown]>([
    ['an object that cannot be made a string', { toString: 'x', valueOf: 1 }],
    ['a number', 42],
    ['a null-prototype object', Object.create(null)],
  ])('refuses a name that is %s with a ConfigError, not a TypeError', (_what, name) => {
    configErrorOf(() => tool({ ...searchIssues, name: name as never }));
    configErrorOf(() => tool({ ...searchIssues, name: name as never, execute: 'x' as never }));
  });

  it('accepts a 64-character name of letters, digits, _ and -', () => {
    const name = `${'a'.repeat(60)}_-9Z`;
    expect(tool({ ...searchIssues, name }).contract.name).toBe(name);
  });

  it('refuses a Standard Schema library value that has no JSON Schema projection', () => {
    const noProjection: StandardSchemaV1<unknown, { query: string }> = {
      '~standard': {
        version: 1,
        vendor: 'handmade',
        validate: (value) => ({ value: value as { query: string } }),
      },
    };
    const err = configErrorOf(() => tool({ ...searchIssues, parameters: noProjection }));
    expect(err.message).toContain('no JSON Schema projection');
  });

  it('refuses a parameters value that is no schema at all', () => {
    configErrorOf(() => tool({ ...searchIssues, parameters: 42 as never }));
  });

  it('refuses an execute that is not a function', () => {
    configErrorOf(() => tool({ ...searchIssues, execute: 'run' as never }));
  });

  it('refuses an empty description', () => {
    const err = configErrorOf(() => tool({ ...searchIssues, description: '' }));
    expect(err.message).toContain('description');
  });

  it.each([
    ['an unknown risk', { risk: 'dangerous' }, 'risk'],
    ['an unknown executor', { executor: 'lambda' }, 'executor'],
    ['an unknown clearance', { clearance: 'secret' }, 'clearance'],
    ['a zero timeout', { timeoutMs: 0 }, 'timeoutMs'],
    ['a fractional timeout', { timeoutMs: 1.5 }, 'timeoutMs'],
    ['a timeout over an hour', { timeoutMs: 3_600_001 }, 'timeoutMs'],
    ['a non-boolean needsApproval', { needsApproval: 'yes' }, 'needsApproval'],
  ])('refuses a policy with %s, naming the field', (_what, policy, field) => {
    const err = configErrorOf(() => tool({ ...searchIssues, ...(policy as object) }));
    expect(err.message).toContain('policy');
    expect(err.details).toEqual({
      issues: [expect.objectContaining({ path: [field] })],
    });
  });
});

describe('tool(): the contract/policy split', () => {
  it('puts identity in the contract and steering in the policy, with defaults', () => {
    const def = tool({ ...searchIssues, version: '2', risk: 'read', timeoutMs: 500 });
    expect(def.contract).toEqual({
      name: 'search_issues',
      description: searchIssues.description,
      parameters: expect.objectContaining({ type: 'object', required: ['query'] }),
      version: '2',
    });
    expect(def.policy).toEqual({
      risk: 'read',
      needsApproval: false,
      executor: 'inprocess',
      timeoutMs: 500,
    });
    expect(def.contractHash).toBe(contractHash(def.contract));
    expect(Object.isFrozen(def)).toBe(true);
  });

  it('leaves an absent version absent from the contract', () => {
    expect('version' in tool(searchIssues).contract).toBe(false);
  });

  it('contractHash ignores every policy field and the implementation', () => {
    const plain = tool(searchIssues);
    const steered = tool({
      ...searchIssues,
      risk: 'destructive',
      needsApproval: true,
      executor: 'remote',
      clearance: 'private',
      timeoutMs: 1000,
      execute: () => 'something else entirely',
    });
    expect(steered.policy).not.toEqual(plain.policy);
    expect(steered.contractHash).toBe(plain.contractHash);
  });

  it('contractHash changes with each identity field', () => {
    const base = tool(searchIssues).contractHash;
    expect(tool({ ...searchIssues, name: 'search_issues2' }).contractHash).not.toBe(base);
    expect(tool({ ...searchIssues, description: 'Other.' }).contractHash).not.toBe(base);
    expect(tool({ ...searchIssues, version: '1' }).contractHash).not.toBe(base);
    expect(
      tool({ ...searchIssues, parameters: z.object({ query: z.string() }) }).contractHash,
    ).not.toBe(base);
  });
});
