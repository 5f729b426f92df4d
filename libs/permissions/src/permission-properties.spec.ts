import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import {
  compilePermissionChain,
  compileShellMatcher,
  evaluatePermission,
  explainShellCommand,
  matchShellCommand,
  type PermissionRule,
  type RiskClass,
  type ShellVerdict,
} from './index';
import { RISK_BIT } from './permission-chain';
import { evaluatePermissionByScan, matchRuleAlone, ruleMayMatch } from './permission-evaluator';

const RANK: Record<ShellVerdict, number> = { allow: 0, ask: 1, deny: 2 };

/**
 * `expect(actual).toEqual(expected)` for a property's thousands of cases, where building the
 * expectation costs more than the case: made only when the values are not deep-strictly equal
 * (which implies toEqual's equality), so toEqual still decides and reports every mismatch.
 */
function expectEqual(actual: unknown, expected: unknown): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual).toEqual(expected);
}

/** `expect(actual).toBe(expected)` in the same way: made only when `Object.is` says they differ. */
function expectSame(actual: unknown, expected: unknown): void {
  if (!Object.is(actual, expected)) expect(actual).toBe(expected);
}

const programs = ['npm', 'git', 'ls', 'rm', 'echo', 'cat', 'grep', 'sudo', 'bash', 'python'];
const args = [
  'test',
  'run',
  'build',
  '-rf',
  '/',
  'push',
  '--force',
  '-c',
  'x',
  '"a b"',
  "'c;d'",
  '$HOME',
  '"$X"',
  '*',
  '2>&1',
  '> out',
  '-la',
];
const simpleCommand = fc
  .tuple(fc.constantFrom(...programs), fc.array(fc.constantFrom(...args), { maxLength: 4 }))
  .map(([p, a]) => [p, ...a].join(' '));
const patternTables = fc.record({
  allow: fc.array(
    fc.constantFrom(
      'npm test',
      'npm run *',
      'git **',
      'ls **',
      'echo *',
      'echo **',
      'cat *',
      'bash **',
      'python **',
      'rm *',
    ),
    { maxLength: 5 },
  ),
  ask: fc.array(fc.constantFrom('git push **', 'npm run build', 'cat **'), { maxLength: 2 }),
  deny: fc.array(fc.constantFrom('rm **', 'git push --force **', 'sudo **'), { maxLength: 2 }),
});

describe('shell matching properties', () => {
  it('no command containing substitution, process substitution or a here-doc is ever allow', () => {
    const construct = fc.constantFrom(
      '$(id)',
      '`id`',
      '"$(id)"',
      '<(id)',
      '>(id)',
      '$((1+1))',
      '<<EOF\nid\nEOF',
      '<<-X\nid\nX',
      'x$(id)y',
    );
    fc.assert(
      fc.property(
        simpleCommand,
        construct,
        simpleCommand,
        fc.constantFrom(' ', '; ', ' && ', ' | '),
        patternTables,
        (a, c, b, sep, tables) => {
          const permissive = {
            ...tables,
            allow: [...tables.allow, ...programs.map((p) => `${p} **`)],
          };
          expect(matchShellCommand(`${a} ${c}${sep}${b}`, permissive)).not.toBe('allow');
        },
      ),
      { numRuns: 500 },
    );
  });

  it("the verdict of 'a; b' is the strictest of a and b", () => {
    fc.assert(
      fc.property(simpleCommand, simpleCommand, patternTables, (a, b, tables) => {
        const va = matchShellCommand(a, tables);
        const vb = matchShellCommand(b, tables);
        const both = matchShellCommand(`${a}; ${b}`, tables);
        expectSame(RANK[both], Math.max(RANK[va], RANK[vb]));
      }),
      { numRuns: 1000 },
    );
  });

  it('a compiled matcher and the explained form give the verdict matchShellCommand gives', () => {
    fc.assert(
      fc.property(
        simpleCommand,
        fc.constantFrom('', '; ', ' && ', ' | '),
        simpleCommand,
        patternTables,
        (a, sep, b, tables) => {
          const command = sep === '' ? a : `${a}${sep}${b}`;
          const verdict = matchShellCommand(command, tables);
          const matcher = compileShellMatcher(tables);
          expectSame(matcher(command), verdict);
          const explained = explainShellCommand(command, tables);
          expectSame(explained.verdict, verdict);
          const verdicts = explained.segments.map((s) => s.verdict);
          if (!verdicts.includes(verdict)) expect(verdicts).toContain(verdict);
          expectEqual(matcher.explain(command), explained);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('adding a deny pattern never weakens a verdict', () => {
    fc.assert(
      fc.property(
        simpleCommand,
        patternTables,
        fc.constantFrom('rm **', 'npm **', 'git push', 'echo *', 'ls -la', 'cat **'),
        (cmd, tables, extra) => {
          const before = matchShellCommand(cmd, tables);
          const after = matchShellCommand(cmd, { ...tables, deny: [...tables.deny, extra] });
          expect(RANK[after]).toBeGreaterThanOrEqual(RANK[before]);
          if (before === 'deny') expect(after).toBe('deny');
        },
      ),
      { numRuns: 500 },
    );
  });
});

const risks: RiskClass[] = ['read', 'write', 'network', 'execute', 'destructive', 'undeclared'];
const toolNames = ['shell', 'http_fetch', 'deploy', 'read_file', 'mcp__x'];
const rule: fc.Arbitrary<PermissionRule> = fc
  .record(
    {
      tool: fc.constantFrom(...toolNames),
      risk: fc.subarray(risks, { minLength: 1 }),
      argv: fc.constantFrom('rm **', 'git push *', 'npm test'),
      domains: fc.constantFrom('evil.example', '*.corp.example').map((d) => [d]),
    },
    { requiredKeys: [] },
  )
  .filter((r) => Object.keys(r).length > 0)
  .map((r) => (r.argv !== undefined && r.tool !== undefined ? { ...r, tool: 'shell' } : r));
const tool = fc.record({
  name: fc.constantFrom(...toolNames),
  risk: fc.option(
    fc.constantFrom('read', 'write', 'network', 'execute', 'destructive') as fc.Arbitrary<'read'>,
    { nil: undefined },
  ),
  needsApproval: fc.boolean(),
});
const input = fc.record({
  command: fc.constantFrom('rm -rf /', 'git push origin', 'npm test', 'echo $(id)', 'ls; rm x'),
  url: fc.constantFrom('https://evil.example/x', 'https://a.corp.example', 'nope'),
});
const layer = fc.record({
  deny: fc.array(rule, { maxLength: 4 }),
  ask: fc.array(rule, { maxLength: 4 }),
});
const preset = fc.option(fc.constantFrom('strict', 'standard', 'open') as fc.Arbitrary<'open'>, {
  nil: undefined,
});

describe('chain properties', () => {
  it('no rule set yields allow through a rule', async () => {
    await fc.assert(
      fc.asyncProperty(layer, layer, preset, tool, input, async (engine, profile, p, t, i) => {
        const chain = compilePermissionChain(
          engine,
          p === undefined ? profile : { ...profile, preset: p },
        );
        const d = await evaluatePermission(chain, t, i);
        if (d.verdict === 'allow') expect(d.decidedBy).toBe('default');
        if (d.decidedBy === 'deny-rule' || d.decidedBy === 'ask-rule')
          expect(d.verdict).not.toBe('allow');
      }),
      { numRuns: 400 },
    );
  });

  it('adding a deny rule never turns a deny into anything weaker (nor weakens any verdict)', async () => {
    await fc.assert(
      fc.asyncProperty(layer, preset, rule, tool, input, async (engine, p, extra, t, i) => {
        const profile = p === undefined ? {} : { preset: p };
        const before = await evaluatePermission(compilePermissionChain(engine, profile), t, i);
        const after = await evaluatePermission(
          compilePermissionChain({ ...engine, deny: [...engine.deny, extra] }, profile),
          t,
          i,
        );
        expect(RANK[after.verdict]).toBeGreaterThanOrEqual(RANK[before.verdict]);
        if (before.verdict === 'deny') expect(after.verdict).toBe('deny');
      }),
      { numRuns: 400 },
    );
  });
});

describe('rule index', () => {
  const expression = fc.constantFrom(
    'tool == "deploy" && input.n > 1',
    'risk == "write"',
    'tool == "shell" && risk == "execute"',
    'risk == "read" && tool == "read_file"',
    'tool == "shell" || risk == "read"',
    'input.n > 1',
    'tool == "deploy" && input.missing.deep == 1',
  );
  const anyRule = fc.oneof(
    rule.map((r) => ({ table: r })),
    expression.map((when) => ({ when })),
  );

  it("a rule left out of a tool's rule view never matches, asks or reports for that tool", () => {
    let leftOut = 0;
    fc.assert(
      fc.property(anyRule, tool, input, fc.integer({ min: 0, max: 3 }), (r, t, i, n) => {
        const layer =
          'table' in r
            ? { deny: [r.table] }
            : { expressions: [{ when: r.when, effect: 'deny' as const }] };
        const entry = compilePermissionChain(layer).deny[0]!;
        const riskClass = t.risk ?? 'undeclared';
        if (ruleMayMatch(entry, t.name, riskClass, RISK_BIT[riskClass])) return;
        leftOut++;
        expectEqual(matchRuleAlone(entry, t.name, riskClass, { ...i, n }), {
          match: 'no',
          diagnostics: 0,
        });
      }),
      { numRuns: 2000 },
    );
    expect(leftOut).toBeGreaterThan(100);
  });
});

describe('rule index (by tool, program and host) against walking every rule', () => {
  const words = ['git', 'push', 'x'];
  const argvPattern = fc.oneof(
    fc
      .tuple(fc.array(fc.constantFrom(...words, '*'), { minLength: 1, maxLength: 3 }), fc.boolean())
      .map(([w, rest]) => [...w, ...(rest ? ['**'] : [])].join(' ')),
    fc.constant('**'),
  );
  const hostPattern = fc.constantFrom(
    'a.example',
    '*.example',
    'b.a.example',
    '*.a.example',
    'corp.test',
    '*.corp.test',
    '*',
    '10.0.0.0/8',
    '127.0.0.1',
  );
  const indexedRule: fc.Arbitrary<PermissionRule> = fc.oneof(
    { arbitrary: fc.record({ tool: fc.constant('shell'), argv: argvPattern }), weight: 3 },
    fc.record(
      {
        tool: fc.constant('shell'),
        argv: fc.array(argvPattern, { minLength: 1, maxLength: 3 }),
        risk: fc.subarray(risks, { minLength: 1 }),
      },
      { requiredKeys: ['argv'] },
    ),
    fc.record(
      {
        tool: fc.constantFrom('http_fetch', 'read_file'),
        domains: fc.array(hostPattern, { minLength: 1, maxLength: 3 }),
        risk: fc.subarray(risks, { minLength: 1 }),
      },
      { requiredKeys: ['domains'] },
    ),
    {
      arbitrary: fc.record({ domains: fc.array(hostPattern, { minLength: 1, maxLength: 2 }) }),
      weight: 2,
    },
    rule,
  );
  const bigLayer = fc.record({
    deny: fc.array(indexedRule, { minLength: 16, maxLength: 40 }),
    ask: fc.array(indexedRule, { minLength: 16, maxLength: 40 }),
    expressions: fc.array(
      fc.record({
        when: fc.constantFrom('tool == "shell" && input.n > 1', 'risk == "network"', 'input.n > 2'),
        effect: fc.constantFrom('deny', 'ask') as fc.Arbitrary<'deny' | 'ask'>,
      }),
      { maxLength: 3 },
    ),
  });
  const command = fc.oneof(
    fc
      .array(
        fc.tuple(
          fc.array(
            fc.oneof(
              { arbitrary: fc.constantFrom(...words), weight: 4 },
              fc.constantFrom('sudo', 'env', 'FOO=1', '>', 'out', '$(id)'),
            ),
            { minLength: 1, maxLength: 4 },
          ),
          fc.constantFrom('; ', ' && ', ' | '),
        ),
        { minLength: 1, maxLength: 3 },
      )
      .map((segments) =>
        segments
          .map(([w, sep]) => w.join(' ') + sep)
          .join('')
          .slice(0, -2),
      ),
    fc.constantFrom(
      'bash -c "git push origin x"',
      'xargs rm -rf',
      'git -C x push',
      "python -c 'x'",
    ),
  );
  const url = fc.constantFrom(
    'https://a.example/x',
    'https://b.a.example',
    'https://c.b.a.example:8443/p',
    'http://corp.test',
    'https://x.corp.test',
    'https://10.1.2.3/',
    'http://127.0.0.1',
    'https://other.test',
    'nope',
    'ftp://a.example',
  );
  const call = fc.record({
    tool: fc.record({
      name: fc.constantFrom('shell', 'http_fetch', 'read_file', 'deploy'),
      risk: fc.option(fc.constantFrom(...risks.filter((r) => r !== 'undeclared')), {
        nil: undefined,
      }),
    }),
    input: fc.record(
      {
        command,
        url,
        n: fc.integer({ min: 0, max: 3 }),
        note: fc.constantFrom('see https://a.example/doc', 'plain'),
      },
      { requiredKeys: [] },
    ),
    taint: fc.option(fc.constantFrom('public', 'private') as fc.Arbitrary<'public'>, {
      nil: undefined,
    }),
  });

  it('gives the decision walking every rule in chain order gives, on random policies', async () => {
    let indexedViews = 0;
    await fc.assert(
      fc.asyncProperty(
        bigLayer,
        preset,
        fc.array(call, { minLength: 1, maxLength: 6 }),
        async (engine, p, calls) => {
          const chain = compilePermissionChain(engine, p === undefined ? undefined : { preset: p });
          for (const c of calls) {
            const context = c.taint === undefined ? {} : { taint: c.taint };
            const indexed = await evaluatePermission(chain, c.tool, c.input, context);
            const scanned = await evaluatePermissionByScan(chain, c.tool, c.input, context);
            expectEqual(indexed, scanned);
          }
          for (const views of chain.ruleViews.values())
            for (const v of views)
              if (v?.denyIndex !== undefined || v?.askIndex !== undefined) indexedViews++;
        },
      ),
      { numRuns: 600 },
    );
    // The generator reaches the index, not only the short layers it leaves out.
    expect(indexedViews).toBeGreaterThan(100);
  });
});

describe('code the matcher cannot read (issue 23)', () => {
  const SHELL_TOOL = { name: 'shell', risk: 'execute' } as const;
  const denyRm = compilePermissionChain({ deny: [{ tool: 'shell', argv: ['rm **'] }] });
  const verdict = async (chain: ReturnType<typeof compilePermissionChain>, command: string) =>
    (await evaluatePermission(chain, SHELL_TOOL, { command })).verdict;

  // Names the program table does not have (a renamed copy of `rm` could carry any of them).
  const unknownName = fc
    .stringMatching(/^[a-z][a-z0-9]{2,7}$/)
    .filter((n) => !/^(?:ls|cat|git|npm|sed|awk|echo|rm)/.test(n))
    .map((n) => `zz${n}`);
  const pathForm = fc.constantFrom('./', '/tmp/', 'bin/', '../', 'node_modules/.bin/');
  const arg = fc.constantFrom('victim', '-rf', '-f', '--', 'a b', '.', 'x/y');
  const argsOf = fc.array(arg, { maxLength: 3 }).map((a) => a.map((w) => `'${w}'`).join(' '));

  it('a program the table does not know never evaluates allow under a deny rule on rm **', async () => {
    await fc.assert(
      fc.asyncProperty(unknownName, argsOf, async (name, a) => {
        expect(await verdict(denyRm, `${name} ${a}`)).not.toBe('allow');
      }),
      { numRuns: 200 },
    );
  });

  it('a program named by a path outside the system directories never evaluates allow', async () => {
    await fc.assert(
      fc.asyncProperty(
        pathForm,
        fc.constantFrom('ls', 'cat', 'git', 'x', 'rm2'),
        argsOf,
        async (dir, name, a) => {
          expect(await verdict(denyRm, `${dir}${name} ${a}`)).not.toBe('allow');
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a chain of wrappers around rm is denied, whatever wraps it', async () => {
    const wrapper = fc.constantFrom(
      'nice',
      'nohup',
      'setsid',
      'timeout 5',
      'stdbuf -oL',
      'ionice -c3',
      'chrt -f 1',
      'taskset -c 0',
      'env X=1',
      'strace -f',
      'valgrind',
      'perf stat',
      'perf record',
      'setarch x86_64',
      'linux64',
      'ssh-agent',
      'eatmydata',
      'chronic',
      'sshpass -p x',
      '/lib64/ld-linux-x86-64.so.2',
      'busybox',
      'xargs',
      'unshare -r',
      'flock /tmp/l',
    );
    await fc.assert(
      fc.asyncProperty(fc.array(wrapper, { minLength: 1, maxLength: 3 }), async (ws) => {
        expect(await verdict(denyRm, `${ws.join(' ')} rm victim`)).toBe('deny');
      }),
      { numRuns: 200 },
    );
  });

  it('running what the same command wrote or copied never evaluates allow', async () => {
    const writer = fc.constantFrom(
      (f: string) => `printf 'rm victim' > ${f}`,
      (f: string) => `cp /bin/rm ${f}`,
      (f: string) => `ln -s /bin/rm ${f}`,
      (f: string) => `install /bin/rm ${f}`,
      (f: string) => `tee ${f} < /tmp/payload`,
      (f: string) => `mv /tmp/payload ${f}`,
    );
    const name = fc.constantFrom('ls', 'cat', 'x', 'git', 'tool');
    const dir = fc.constantFrom('', '/usr/local/bin/', './', '/tmp/');
    const sep = fc.constantFrom('; ', ' && ', '\n');
    await fc.assert(
      fc.asyncProperty(writer, name, dir, sep, async (w, n, d, s) => {
        const run = d === '' || d === '/usr/local/bin/' ? n : `${d}${n}`;
        expect(await verdict(denyRm, `${w(`${d}${n}`)}${s}${run} victim`)).not.toBe('allow');
      }),
      { numRuns: 200 },
    );
  });

  it('cd D && a write to F is never weaker than the same write to D/F', async () => {
    const chain = compilePermissionChain({});
    const dir = fc.constantFrom(
      '.git',
      '.vscode',
      '.github',
      '.github/workflows',
      'src',
      'a/b',
      '.git/hooks',
    );
    const file = fc.constantFrom(
      'config',
      'settings.json',
      'ci.yml',
      'x',
      'workflows/ci.yml',
      'pre-commit',
    );
    const write = fc.constantFrom(
      (f: string) => `printf x > ${f}`,
      (f: string) => `tee ${f} < /tmp/x`,
      (f: string) => `cp /tmp/x ${f}`,
      (f: string) => `sed -i s/a/b/ ${f}`,
      (f: string) => `echo x >> ${f}`,
    );
    const cd = fc.constantFrom('cd', 'pushd', 'cd --', 'cd -P');
    await fc.assert(
      fc.asyncProperty(cd, dir, file, write, async (c, d, f, w) => {
        const direct = await verdict(chain, w(`${d}/${f}`));
        const through = await verdict(chain, `${c} ${d} && ${w(f)}`);
        expect(RANK[through]).toBeGreaterThanOrEqual(RANK[direct]);
      }),
      { numRuns: 300 },
    );
  });
});
