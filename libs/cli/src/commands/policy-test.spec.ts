import { ExitCode } from '../run-cli';
import { runCaptured } from '../../test/run-captured';

const policy = JSON.stringify({
  engine: {
    deny: [{ tool: 'shell', argv: 'git push --force **', reason: 'no force pushes' }],
    ask: [{ tool: 'shell', argv: 'git push **' }],
  },
});

const passing = JSON.stringify({
  tools: { shell: { risk: 'execute' } },
  cases: [
    {
      name: 'no force push',
      tool: 'shell',
      input: { command: 'git push --force origin' },
      expect: 'deny',
    },
    {
      tool: 'shell',
      input: { command: 'git push origin' },
      expect: { verdict: 'ask', decidedBy: 'ask-rule' },
    },
  ],
});

/** Runs `toolgate` offline: files come from `files`, and there is no gateway, URL or token. */
function run(argv: string[], files: Record<string, string>) {
  return runCaptured(argv, {
    readFile: async (path) => {
      const text = files[path];
      if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
      return text;
    },
    fetch: () => {
      throw new Error('policy test must not call the gateway');
    },
  });
}

describe('toolgate policy test', () => {
  it('passes offline, without a gateway or a token', async () => {
    const r = await run(['policy', 'test', 'p.json', '--cases', 'c.json'], {
      'p.json': policy,
      'c.json': passing,
    });
    expect(r).toEqual({
      code: ExitCode.Ok,
      stdout:
        'ok   1 no force push\nok   2 shell {"command":"git push origin"}\npolicy test: 2 cases, 2 passed, 0 failed\n',
      stderr: '',
    });
  });

  it('exits 1 on a mismatch and shows what was expected beside what was decided', async () => {
    const cases = JSON.stringify({
      tools: { shell: { risk: 'execute' } },
      cases: [{ tool: 'shell', input: { command: 'git push origin' }, expect: 'allow' }],
    });
    const r = await run(['policy', 'test', 'p.json', '--cases', 'c.json'], {
      'p.json': JSON.stringify({ document: JSON.parse(policy) }),
      'c.json': cases,
    });
    expect(r.code).toBe(ExitCode.Failed);
    expect(r.stdout.split('\n')).toEqual([
      'FAIL 1 shell {"command":"git push origin"}',
      '       verdict: expected allow, got ask',
      expect.stringMatching(
        /^ {7}decided: ask by ask-rule \{"source":"engine",.*"argv":"git push \*\*"\}: /,
      ),
      'policy test: 1 cases, 0 passed, 1 failed',
      '',
    ]);
    const json = await run(['policy', 'test', 'p.json', '--cases', 'c.json', '--json'], {
      'p.json': policy,
      'c.json': cases,
    });
    expect(json.code).toBe(ExitCode.Failed);
    expect(JSON.parse(json.stdout)).toMatchObject({
      passed: 0,
      failed: 1,
      results: [
        { index: 1, passed: false, expected: { verdict: 'allow' }, actual: { verdict: 'ask' } },
      ],
    });
  });

  it('exits 2 on files it cannot read or that are not cases, and 1 on a policy that does not compile', async () => {
    const missing = await run(['policy', 'test', 'p.json', '--cases', 'nope.json'], {
      'p.json': policy,
    });
    expect(missing.code).toBe(ExitCode.Usage);
    expect(missing.stderr).toMatch(/^error: cannot read nope\.json: ENOENT/);
    const badCases = await run(['policy', 'test', 'p.json', '--cases', 'c.json'], {
      'p.json': policy,
      'c.json': JSON.stringify({ cases: [{ tool: 'shell', input: {}, expect: 'perhaps' }] }),
    });
    expect(badCases.code).toBe(ExitCode.Usage);
    expect(badCases.stderr).toMatch(/^error: c\.json: invalid cases: cases\.0\.expect/);
    const notJson = await run(['policy', 'test', 'p.json', '--cases', 'c.json'], {
      'p.json': '{ nope',
      'c.json': passing,
    });
    expect(notJson.code).toBe(ExitCode.Usage);
    expect(notJson.stderr).toMatch(/^error: p\.json is not valid JSON/);
    const badPolicy = await run(['policy', 'test', 'p.json', '--cases', 'c.json'], {
      'p.json': JSON.stringify({ engine: { deny: [{ tool: 'shell', argv: '' }] } }),
      'c.json': passing,
    });
    expect(badPolicy.code).toBe(ExitCode.Failed);
    expect(badPolicy.stderr).toMatch(/^config: policy/);
    const noCases = await run(['policy', 'test', 'p.json'], { 'p.json': policy });
    expect(noCases.code).toBe(ExitCode.Usage);
    expect(noCases.stderr).toContain("required option '--cases <file>' not specified");
  });
});
