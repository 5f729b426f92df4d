import { ConfigError } from '@toolgate/contracts';
import { parsePolicyTestCases, runPolicyTests } from './policy-cases';

const policy = {
  engine: {
    deny: [{ tool: 'shell', argv: 'git push --force **', reason: 'no force pushes' }],
    ask: [{ tool: 'shell', argv: 'git push **' }, { risk: 'undeclared' }],
  },
  profiles: { ci: { preset: 'strict' } },
  remote: { engine: { hooks: [{ name: 'egress', unauthenticated: true }] } },
};

describe('runPolicyTests', () => {
  it('passes cases whose verdict, decidedBy, rule fields and reason all match', async () => {
    const run = await runPolicyTests(
      policy,
      parsePolicyTestCases({
        tools: { shell: { risk: 'execute' }, read_file: { risk: 'read' } },
        cases: [
          {
            name: 'no force push',
            tool: 'shell',
            input: { command: 'git push --force origin main' },
            hooks: { egress: 'pass' },
            expect: {
              verdict: 'deny',
              decidedBy: 'deny-rule',
              rule: { kind: 'rule', argv: 'git push --force **' },
              reason: 'force',
            },
          },
          {
            tool: 'shell',
            input: { command: 'git push origin main' },
            hooks: { egress: 'pass' },
            expect: 'ask',
          },
          { tool: 'read_file', input: { path: 'a' }, hooks: { egress: 'pass' }, expect: 'allow' },
        ],
      }),
    );
    expect(run).toMatchObject({ passed: 3, failed: 0 });
    expect(run.results.map((r) => r.name)).toEqual([
      'no force push',
      'shell {"command":"git push origin main"}',
      'read_file {"path":"a"}',
    ]);
  });

  it('fails a case with one line per difference', async () => {
    const run = await runPolicyTests(
      policy,
      parsePolicyTestCases({
        tools: { shell: { risk: 'execute' } },
        cases: [
          {
            tool: 'shell',
            input: { command: 'git push origin main' },
            hooks: { egress: 'pass' },
            expect: {
              verdict: 'allow',
              decidedBy: 'default',
              rule: { argv: 'git push --force **', layer: 'ask' },
              reason: 'nope',
            },
          },
        ],
      }),
    );
    expect(run).toMatchObject({ passed: 0, failed: 1 });
    expect(run.results[0]).toMatchObject({
      index: 1,
      passed: false,
      actual: { verdict: 'ask', decidedBy: 'ask-rule', rule: { argv: 'git push **' } },
    });
    expect(run.results[0]!.mismatches).toEqual([
      'verdict: expected allow, got ask',
      'decidedBy: expected default, got ask-rule',
      'rule.argv: expected "git push --force **", got "git push **"',
      expect.stringMatching(/^reason: expected it to contain "nope", got /),
    ]);
  });

  it('answers remote hooks from the case, and fails a case that leaves a consulted hook unanswered', async () => {
    const cases = parsePolicyTestCases({
      tools: { http_fetch: { risk: 'network' } },
      cases: [
        {
          tool: 'http_fetch',
          input: { url: 'https://x.example' },
          hooks: { egress: 'deny' },
          expect: 'deny',
        },
        {
          tool: 'http_fetch',
          input: { url: 'https://x.example' },
          hooks: { egress: { modifiedInput: { url: 'https://y.example' } } },
          expect: 'allow',
        },
        { tool: 'http_fetch', input: { url: 'https://x.example' }, expect: 'allow' },
      ],
    });
    const run = await runPolicyTests(policy, cases);
    expect(run.results.map((r) => r.passed)).toEqual([true, true, false]);
    expect(run.results[0]!.actual).toMatchObject({
      decidedBy: 'hook',
      rule: { name: 'remote:egress' },
    });
    expect(run.results[2]!.mismatches).toEqual([
      'the policy consulted remote hook "egress" and the case gives no answer',
    ]);
  });

  it('decides with the risk the cases file declares; an undeclared tool is undeclared to the rules', async () => {
    const run = await runPolicyTests(
      policy,
      parsePolicyTestCases({
        tools: { deploy: { risk: 'execute', needsApproval: true } },
        cases: [
          {
            tool: 'deploy',
            input: {},
            hooks: { egress: 'pass' },
            expect: { verdict: 'ask', decidedBy: 'default' },
          },
          {
            tool: 'mystery',
            input: {},
            hooks: { egress: 'pass' },
            expect: { verdict: 'ask', rule: { risk: 'undeclared' } },
          },
        ],
      }),
    );
    expect(run).toMatchObject({ passed: 2, failed: 0 });
  });

  it('applies the profile a case names, and denies one the policy does not define', async () => {
    const run = await runPolicyTests(
      policy,
      parsePolicyTestCases({
        tools: { write_file: { risk: 'write' } },
        cases: [
          {
            tool: 'write_file',
            input: { path: '.env' },
            profile: 'ci',
            hooks: { egress: 'pass' },
            expect: { verdict: 'deny', rule: { kind: 'protected-path' } },
          },
          {
            tool: 'write_file',
            input: { path: 'a' },
            profile: 'nope',
            expect: { verdict: 'deny', reason: 'unknown permission profile "nope"' },
          },
        ],
      }),
    );
    expect(run.results.map((r) => r.mismatches)).toEqual([[], []]);
  });

  it('refuses a policy a put would refuse', async () => {
    const cases = parsePolicyTestCases({ cases: [{ tool: 'x', input: {}, expect: 'allow' }] });
    await expect(runPolicyTests({ engine: { deny: 'all' } }, cases)).rejects.toThrow(ConfigError);
  });
});

describe('parsePolicyTestCases', () => {
  it('names where a cases file is wrong', () => {
    expect(() => parsePolicyTestCases({ cases: [] })).toThrow(/^invalid cases: cases: /);
    expect(() =>
      parsePolicyTestCases({ cases: [{ tool: 'x', input: {}, expect: 'maybe' }] }),
    ).toThrow(/cases\.0\.expect/);
    expect(() =>
      parsePolicyTestCases({ cases: [{ tool: 'x', input: {}, expect: 'allow', extra: 1 }] }),
    ).toThrow(ConfigError);
    expect(() =>
      parsePolicyTestCases({
        tools: { x: { risk: 'scary' } },
        cases: [{ tool: 'x', input: {}, expect: 'allow' }],
      }),
    ).toThrow(/tools\.x\.risk/);
  });
});
