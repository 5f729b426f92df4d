import {
  compilePermissionChain,
  compilePolicyDocument,
  describePermissionChain,
  evaluatePermission,
  parsePolicyDocument,
  type PermissionHook,
} from './index';
import { configError } from '../test/config-error';

const shell = { name: 'shell', risk: 'execute' as const };
const fetchTool = { name: 'http_fetch', risk: 'network' as const };

describe('hooks', () => {
  it('run in registration order, sync or async, and undefined passes', async () => {
    const seen: string[] = [];
    const chain = compilePermissionChain(
      { hooks: [() => void seen.push('engine-sync'), async () => void seen.push('engine-async')] },
      { hooks: [() => void seen.push('profile')] },
    );
    const d = await evaluatePermission(chain, { name: 't' }, {});
    expect(seen).toEqual(['engine-sync', 'engine-async', 'profile']);
    expect(d).toMatchObject({ verdict: 'allow', decidedBy: 'default' });
  });

  it.each(['allow', 'deny', 'ask'] as const)(
    '%s is decisive and stops the chain',
    async (verdict) => {
      let later = false;
      const chain = compilePermissionChain({
        hooks: [async () => verdict, () => void (later = true)],
        deny: [{ tool: 't' }],
      });
      const d = await evaluatePermission(chain, { name: 't' }, {});
      expect(d).toMatchObject({ verdict, decidedBy: 'hook', rule: { kind: 'hook', index: 0 } });
      expect(later).toBe(false);
    },
  );

  it("a verdict with the hook's own reason keeps it (sync and async, hook and canUseTool)", async () => {
    const chain = compilePermissionChain({
      hooks: [
        { name: 'opa', run: async () => ({ verdict: 'deny', reason: 'tickets are read-only' }) },
      ],
    });
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'hook',
      reason: "permission hook 'opa' returned deny: tickets are read-only",
    });
    const can = compilePermissionChain({
      canUseTool: () => ({ verdict: 'deny', reason: 'not in office hours' }),
    });
    expect(await evaluatePermission(can, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'canUseTool',
      reason: 'canUseTool returned deny: not in office hours',
    });
  });

  it('{ modifiedInput } substitutes the input for later layers and for execute', async () => {
    const chain = compilePermissionChain({
      hooks: [() => ({ modifiedInput: { command: 'rm -rf /' } })],
      deny: [{ tool: 'shell', argv: 'rm **' }],
    });
    const d = await evaluatePermission(chain, shell, { command: 'ls' });
    expect(d).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
      input: { command: 'rm -rf /' },
    });
    const pass = compilePermissionChain({ hooks: [async () => ({ modifiedInput: { a: 2 } })] });
    expect(await evaluatePermission(pass, { name: 't' }, { a: 1 })).toMatchObject({
      verdict: 'allow',
      input: { a: 2 },
    });
  });

  it('a hook that throws fails closed with the reason kept', async () => {
    const chain = compilePermissionChain({
      hooks: [
        {
          name: 'opa',
          run: () => {
            throw new Error('opa unreachable');
          },
        },
      ],
    });
    const d = await evaluatePermission(chain, { name: 't' }, {});
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'hook', rule: { name: 'opa' } });
    expect(d.reason).toContain('opa unreachable');
  });

  it('a rejected promise fails closed', async () => {
    const chain = compilePermissionChain({ hooks: [() => Promise.reject(new Error('boom'))] });
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      reason: expect.stringContaining('boom'),
    });
  });

  it('a hook that misses its (configurable) deadline fails closed', async () => {
    const never: PermissionHook = () => new Promise(() => undefined);
    const chain = compilePermissionChain({ hookTimeoutMs: 20, hooks: [never] });
    const d = await evaluatePermission(chain, { name: 't' }, {});
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
    expect(d.reason).toContain('20 ms');
    const own = compilePermissionChain({ hooks: [{ timeoutMs: 10, run: never }] });
    expect((await evaluatePermission(own, { name: 't' }, {})).reason).toContain('10 ms');
  });

  it('an invalid hook result fails closed', async () => {
    const chain = compilePermissionChain({ hooks: [(() => 'yes') as unknown as PermissionHook] });
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'hook',
    });
  });

  it('hooks receive agent, taint, isolation and the effective risk', async () => {
    let ctx: unknown;
    const chain = compilePermissionChain(
      { hooks: [(_n, _i, c) => void (ctx = c)] },
      { riskOverrides: { t: 'write' } },
    );
    await evaluatePermission(
      chain,
      { name: 't', risk: 'read' },
      {},
      { agent: { agentType: 'coder' }, taint: 'internal', isolation: 'none' },
    );
    expect(ctx).toMatchObject({
      agent: { agentType: 'coder' },
      taint: 'internal',
      isolation: 'none',
      tool: { name: 't', risk: 'write' },
    });
  });
});

describe('hooks: synchronous and asynchronous steps interleaved', () => {
  it('runs sync and async hooks in order, passing substituted input through, then an async canUseTool', async () => {
    const seen: string[] = [];
    const chain = compilePermissionChain({
      hooks: [
        (_n, i) => void seen.push(`sync1:${JSON.stringify(i)}`),
        async (_n, i) => (seen.push(`async2:${JSON.stringify(i)}`), { modifiedInput: { step: 2 } }),
        (_n, i) => (seen.push(`sync3:${JSON.stringify(i)}`), { modifiedInput: { step: 3 } }),
        async (_n, i) => void seen.push(`async4:${JSON.stringify(i)}`),
      ],
      canUseTool: async (_n, i) => (
        seen.push(`can:${JSON.stringify(i)}`),
        { modifiedInput: { step: 5 } }
      ),
    });
    const d = await evaluatePermission(chain, { name: 't', needsApproval: true }, { step: 0 });
    expect(seen).toEqual([
      'sync1:{"step":0}',
      'async2:{"step":0}',
      'sync3:{"step":2}',
      'async4:{"step":3}',
      'can:{"step":3}',
    ]);
    expect(d).toMatchObject({ verdict: 'ask', decidedBy: 'default', input: { step: 5 } });
  });

  it('an async hook decides before the rules; a later hook is not run', async () => {
    let later = false;
    const chain = compilePermissionChain({
      hooks: [async () => 'ask' as const, () => void (later = true)],
      deny: [{ tool: 't' }],
    });
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'ask',
      decidedBy: 'hook',
      rule: { index: 0 },
    });
    expect(later).toBe(false);
  });

  it('a thenable whose then() throws, or that yields another thenable, is handled like await would', async () => {
    const throwing = compilePermissionChain({
      hooks: [
        {
          name: 'odd',
          run: () =>
            ({
              then: () => {
                throw new Error('then broke');
              },
            }) as unknown as Promise<undefined>,
        },
      ],
    });
    const d = await evaluatePermission(throwing, { name: 't' }, {});
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'hook', rule: { name: 'odd' } });
    expect(d.reason).toContain('then broke');
    const nested = compilePermissionChain({
      hooks: [
        () =>
          ({
            then: (ok: (v: unknown) => void) => ok(Promise.resolve('deny')),
          }) as unknown as Promise<undefined>,
      ],
    });
    expect(await evaluatePermission(nested, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'hook',
    });
  });

  it('an answer after the deadline is ignored (the call stays denied)', async () => {
    let answer: ((v: 'allow') => void) | undefined;
    const chain = compilePermissionChain({
      hooks: [{ timeoutMs: 5, run: () => new Promise<'allow'>((r) => (answer = r)) }],
    });
    const d = await evaluatePermission(chain, { name: 't' }, {});
    answer!('allow');
    await new Promise((r) => setImmediate(r));
    expect(d).toMatchObject({
      verdict: 'deny',
      decidedBy: 'hook',
      reason: expect.stringContaining('5 ms'),
    });
  });

  it('rejects (never throws synchronously) when given something that is not a chain', async () => {
    let p: Promise<unknown> | undefined;
    expect(() => (p = evaluatePermission({} as never, { name: 't' }, {}))).not.toThrow();
    await expect(p).rejects.toThrow(TypeError);
  });
});

describe('canUseTool', () => {
  it('the profile slot wins over the engine slot', async () => {
    const chain = compilePermissionChain(
      { canUseTool: () => 'deny' },
      { canUseTool: () => 'allow' },
    );
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'allow',
      decidedBy: 'canUseTool',
    });
  });

  it('modifiedInput continues to the default (which asks for needsApproval)', async () => {
    const chain = compilePermissionChain({ canUseTool: () => ({ modifiedInput: { x: 1 } }) });
    expect(await evaluatePermission(chain, { name: 't', needsApproval: true }, {})).toMatchObject({
      verdict: 'ask',
      decidedBy: 'default',
      input: { x: 1 },
    });
  });

  it('throwing or timing out fails closed', async () => {
    const thrower = compilePermissionChain({
      canUseTool: () => {
        throw new Error('nope');
      },
    });
    expect(await evaluatePermission(thrower, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'canUseTool',
    });
    const slow = compilePermissionChain({
      hookTimeoutMs: 10,
      canUseTool: () => new Promise(() => undefined),
    });
    expect(await evaluatePermission(slow, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      reason: expect.stringContaining('10 ms'),
    });
  });

  it('is not reached when a rule decides', async () => {
    const chain = compilePermissionChain({ deny: [{ tool: 't' }], canUseTool: () => 'allow' });
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
    });
  });
});

describe('rules', () => {
  it('match by tool name(s) and risk, ANDed; undeclared matches tools without risk', async () => {
    const chain = compilePermissionChain({
      deny: [{ tool: ['a', 'b'], risk: 'write' }],
      ask: [{ risk: 'undeclared' }],
    });
    expect((await evaluatePermission(chain, { name: 'a', risk: 'write' }, {})).verdict).toBe(
      'deny',
    );
    expect((await evaluatePermission(chain, { name: 'a', risk: 'read' }, {})).verdict).toBe(
      'allow',
    );
    expect((await evaluatePermission(chain, { name: 'c', risk: 'write' }, {})).verdict).toBe(
      'allow',
    );
    expect((await evaluatePermission(chain, { name: 'c' }, {})).verdict).toBe('ask');
  });

  it('argv rules apply to the shell tool; unanalysable commands ask (never allow) with onTimeout deny', async () => {
    const chain = compilePermissionChain({
      deny: [{ argv: ['rm **', 'git push --force **'] }],
      onTimeout: 'allow',
    });
    expect(
      (await evaluatePermission(chain, shell, { command: 'ls && sudo rm -rf /' })).verdict,
    ).toBe('deny');
    expect(
      (await evaluatePermission(chain, shell, { command: 'git push --force origin main' })).verdict,
    ).toBe('deny');
    expect(
      (await evaluatePermission(chain, { name: 'other' }, { command: 'rm -rf /' })).verdict,
    ).toBe('allow');
    const d = await evaluatePermission(chain, shell, { command: 'echo $(rm -rf /)' });
    expect(d).toMatchObject({
      verdict: 'ask',
      decidedBy: 'deny-rule',
      approval: { onTimeout: 'deny' },
    });
    expect(d.reason).toContain('command substitution');
    expect((await evaluatePermission(chain, shell, { cmd: 'x' })).verdict).toBe('ask');
  });

  it('domain rules are enforced for http_fetch and advisory for other tools', async () => {
    const chain = compilePermissionChain({
      deny: [{ domains: ['evil.example', '*.evil.example'] }],
    });
    expect(
      await evaluatePermission(chain, fetchTool, { url: 'https://EVIL.example./x' }),
    ).toMatchObject({ verdict: 'deny', decidedBy: 'deny-rule' });
    expect(
      (await evaluatePermission(chain, fetchTool, { url: 'https://a.b.evil.example' })).verdict,
    ).toBe('deny');
    expect(
      (await evaluatePermission(chain, fetchTool, { url: 'https://notevil.example' })).verdict,
    ).toBe('allow');
    expect((await evaluatePermission(chain, fetchTool, { url: 'not a url' })).verdict).toBe('ask');
    const d = await evaluatePermission(chain, shell, { command: 'curl https://evil.example/x' });
    expect(d).toMatchObject({
      verdict: 'allow',
      advisory: [{ layer: 'deny', host: 'evil.example' }],
    });
  });

  it('readonly isolation denies write and destructive tools, from the profile or the dispatch', async () => {
    const chain = compilePermissionChain({}, { isolation: 'readonly' });
    expect(await evaluatePermission(chain, { name: 'w', risk: 'write' }, {})).toMatchObject({
      verdict: 'deny',
      rule: { source: 'isolation:readonly' },
    });
    expect((await evaluatePermission(chain, { name: 'r', risk: 'read' }, {})).verdict).toBe(
      'allow',
    );
    expect((await evaluatePermission(chain, { name: 'u' }, {})).verdict).toBe('allow');
    const plain = compilePermissionChain();
    expect(
      (
        await evaluatePermission(
          plain,
          { name: 'd', risk: 'destructive' },
          {},
          { isolation: 'readonly' },
        )
      ).verdict,
    ).toBe('deny');
  });

  it('risk overrides reclassify a tool before presets apply, without mutating the tool', async () => {
    const tool = Object.freeze({ name: 'mcp__github__create_issue' });
    const chain = compilePermissionChain(
      {},
      { preset: 'strict', riskOverrides: { mcp__github__create_issue: 'destructive' } },
    );
    expect(await evaluatePermission(chain, tool, {})).toMatchObject({
      verdict: 'deny',
      risk: 'destructive',
    });
    expect(tool).toEqual({ name: 'mcp__github__create_issue' });
    const other = compilePermissionChain({}, { preset: 'strict' });
    expect((await evaluatePermission(other, tool, {})).verdict).toBe('ask');
  });

  it('ask results carry approval settings: rule, then profile, then engine, then 24 h / deny', async () => {
    const chain = compilePermissionChain(
      {
        approvalTimeoutMs: 1000,
        ask: [{ tool: 'a', approvalTimeoutMs: 5, onTimeout: 'allow' }, { tool: 'b' }],
      },
      { onTimeout: 'allow' },
    );
    expect((await evaluatePermission(chain, { name: 'a' }, {})).approval).toEqual({
      timeoutMs: 5,
      onTimeout: 'allow',
    });
    expect((await evaluatePermission(chain, { name: 'b' }, {})).approval).toEqual({
      timeoutMs: 1000,
      onTimeout: 'allow',
    });
    const plain = compilePermissionChain();
    expect(
      (await evaluatePermission(plain, { name: 'x', needsApproval: true }, {})).approval,
    ).toEqual({ timeoutMs: 86_400_000, onTimeout: 'deny' });
    expect((await evaluatePermission(plain, { name: 'x' }, {})).approval).toBeUndefined();
  });

  it('invalid configuration is a ConfigError at compile time', () => {
    expect(configError(() => compilePermissionChain({ deny: [{}] }))).toBe(true);
    expect(configError(() => compilePermissionChain({ deny: [{ argv: '** rm' }] }))).toBe(true);
    expect(configError(() => compilePermissionChain({ deny: [{ argv: 'rm *.ts' }] }))).toBe(true);
    expect(
      configError(() => compilePermissionChain({ deny: [{ tool: 'git', argv: 'rm **' }] })),
    ).toBe(true);
    expect(configError(() => compilePermissionChain({ deny: [{ domains: ['http://x/'] }] }))).toBe(
      true,
    );
    expect(configError(() => compilePermissionChain({ deny: [{ risk: 'scary' as 'read' }] }))).toBe(
      true,
    );
    expect(configError(() => compilePermissionChain({}, { preset: 'lax' as 'open' }))).toBe(true);
    expect(
      configError(() =>
        compilePermissionChain({ expressions: [{ when: 'tool ==', effect: 'deny' }] }),
      ),
    ).toBe(true);
    expect(
      configError(() =>
        compilePermissionChain({ expressions: [{ when: 'tool', effect: 'deny' }] }),
      ),
    ).toBe(true);
    expect(
      configError(() =>
        compilePermissionChain({ expressions: [{ when: 'x == 1', effect: 'deny' }] }),
      ),
    ).toBe(true);
    expect(
      configError(() => compilePermissionChain({ hooks: ['x' as unknown as PermissionHook] })),
    ).toBe(true);
  });
});

describe('expression rules (CEL)', () => {
  it('deny or ask when true, never allow', async () => {
    const chain = compilePermissionChain({
      expressions: [
        {
          id: 'big',
          when: 'tool == "transfer" && input.amount > 1000',
          effect: 'deny',
          reason: 'too large',
        },
        { when: 'agent.agentType == "intern" && risk != "read"', effect: 'ask' },
        { when: 'has(input.n) && input.n + 1 == 3', effect: 'ask' },
      ],
    });
    expect(
      await evaluatePermission(chain, { name: 'transfer', risk: 'write' }, { amount: 5000 }),
    ).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
      reason: 'too large',
      rule: { kind: 'expression', id: 'big' },
    });
    expect(
      (await evaluatePermission(chain, { name: 'transfer', risk: 'write' }, { amount: 5 })).verdict,
    ).toBe('allow');
    expect(
      (
        await evaluatePermission(
          chain,
          { name: 'x', risk: 'write' },
          {},
          { agent: { agentType: 'intern' } },
        )
      ).verdict,
    ).toBe('ask');
    expect((await evaluatePermission(chain, { name: 'x', risk: 'read' }, { n: 2 })).verdict).toBe(
      'ask',
    );
  });

  it('an error or a non-boolean asks and is reported', async () => {
    const chain = compilePermissionChain({
      expressions: [
        { when: 'input.missing == 1', effect: 'deny' },
        { when: 'input.v', effect: 'ask' },
      ],
    });
    const err = await evaluatePermission(chain, { name: 't', risk: 'read' }, {});
    expect(err).toMatchObject({
      verdict: 'ask',
      decidedBy: 'deny-rule',
      approval: { onTimeout: 'deny' },
    });
    expect(err.diagnostics[0]).toMatchObject({ kind: 'expression-error' });
    const nonBool = await evaluatePermission(
      chain,
      { name: 't', risk: 'read' },
      { missing: 2, v: 'yes' },
    );
    expect(nonBool).toMatchObject({ verdict: 'ask', decidedBy: 'ask-rule' });
    expect(nonBool.diagnostics[0]!.message).toContain('not a boolean');
  });

  it('a definite deny later in the layer wins over an erroring expression', async () => {
    const chain = compilePermissionChain({
      expressions: [{ when: 'input.missing', effect: 'deny' }],
      deny: [{ tool: 't' }],
    });
    expect((await evaluatePermission(chain, { name: 't' }, {})).verdict).toBe('deny');
  });
});

describe('taint gate', () => {
  const chain = compilePermissionChain({
    taint: {
      egressTools: ['send_email'],
      allowlist: [
        { tool: 'send_email', target: 'ops@corp', taint: 'internal' },
        { tool: 'http_fetch', target: '*.corp.example', taint: 'private' },
      ],
      exceptions: [
        { id: 'status', when: 'tool == "http_fetch" && target == "status.example"' },
        { when: 'input.oops' },
      ],
    },
  });
  const email = { name: 'send_email', clearance: 'public' as const };

  it('denies an egress tool cleared below the taint', async () => {
    const d = await evaluatePermission(
      chain,
      email,
      { to: 'x@y' },
      { taint: 'internal', target: 'x@y' },
    );
    expect(d).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { kind: 'taint-gate', taint: 'internal', clearance: 'public' },
    });
    expect(
      (
        await evaluatePermission(
          chain,
          { name: 'upload', risk: 'network' },
          {},
          { taint: 'private' },
        )
      ).verdict,
    ).toBe('deny');
  });

  it('lets through what the clearance covers, non-egress tools and untainted calls', async () => {
    expect(
      (
        await evaluatePermission(
          chain,
          { ...email, clearance: 'private' },
          {},
          { taint: 'private' },
        )
      ).verdict,
    ).toBe('allow');
    expect(
      (
        await evaluatePermission(
          chain,
          { name: 'read_file', risk: 'read' },
          {},
          { taint: 'private' },
        )
      ).verdict,
    ).toBe('allow');
    expect((await evaluatePermission(chain, email, {})).verdict).toBe('allow');
  });

  it('static allowlist entries (tool, target, taint) open the gate up to their taint', async () => {
    expect(
      (await evaluatePermission(chain, email, {}, { taint: 'internal', target: 'ops@corp' }))
        .verdict,
    ).toBe('allow');
    expect(
      (await evaluatePermission(chain, email, {}, { taint: 'private', target: 'ops@corp' }))
        .verdict,
    ).toBe('deny');
    expect(
      (
        await evaluatePermission(
          chain,
          fetchTool,
          { url: 'https://wiki.corp.example' },
          { taint: 'private' },
        )
      ).verdict,
    ).toBe('allow');
  });

  it('exception expressions open the gate; their errors keep it closed and are reported', async () => {
    expect(
      (
        await evaluatePermission(
          chain,
          fetchTool,
          { url: 'https://status.example/' },
          { taint: 'private' },
        )
      ).verdict,
    ).toBe('allow');
    const d = await evaluatePermission(
      chain,
      fetchTool,
      { url: 'https://other.example/' },
      { taint: 'private' },
    );
    expect(d.verdict).toBe('deny');
    expect(d.diagnostics.some((x) => x.kind === 'taint-exception-error')).toBe(true);
  });
});

describe('policy document', () => {
  const doc = {
    engine: {
      deny: [{ risk: 'destructive' }],
      ask: [{ tool: 'deploy_service', approvalTimeoutMs: 3_600_000, onTimeout: 'deny' }],
    },
    profiles: {
      operator: { preset: 'standard', riskOverrides: { mcp__github__create_issue: 'write' } },
      worker: {
        inheritPermissions: true,
        expressions: [{ when: 'tool == "shell"', effect: 'ask' }],
      },
    },
  };

  it('round-trips through JSON and compiles per profile', async () => {
    const parsed = parsePolicyDocument(JSON.parse(JSON.stringify(doc)));
    const policy = compilePolicyDocument(parsed, { engine: { hooks: [() => undefined] } });
    const operator = policy.chainFor('operator');
    expect(
      await evaluatePermission(operator, { name: 'deploy_service', risk: 'execute' }, {}),
    ).toMatchObject({
      verdict: 'ask',
      approval: { timeoutMs: 3_600_000 },
    });
    const worker = policy.chainFor('worker', operator);
    expect(describePermissionChain(worker).ask.map((r) => r.source)).toEqual([
      'engine',
      'preset:standard',
      'profile:worker',
    ]);
    expect(describePermissionChain(policy.chainFor('worker')).ask.map((r) => r.source)).toEqual([
      'engine',
      'profile:worker',
    ]);
    expect(JSON.parse(JSON.stringify(describePermissionChain(worker)))).toEqual(
      describePermissionChain(worker),
    );
  });

  it('refuses invalid documents with a ConfigError naming the problem', () => {
    expect(
      configError(() => parsePolicyDocument({ engine: { deny: [{ tool: 'bad name!' }] } })),
    ).toBe(true);
    expect(
      configError(() => parsePolicyDocument({ engine: { deny: [{ argv: 'rm ** x' }] } })),
    ).toBe(true);
    expect(configError(() => parsePolicyDocument({ engine: {}, extra: 1 }))).toBe(true);
    expect(configError(() => compilePolicyDocument(parsePolicyDocument({})).chainFor('nope'))).toBe(
      true,
    );
  });

  it.each(['__proto__', 'constructor', 'toString', 'hasOwnProperty'])(
    'a profile named %s is unknown unless the document has one of that name',
    (name) => {
      const policy = compilePolicyDocument(parsePolicyDocument({ profiles: { ops: {} } }));
      expect(configError(() => policy.chainFor(name))).toBe(true);
      expect(configError(() => policy.chainFor(name, policy.engine))).toBe(true);
    },
  );
});
