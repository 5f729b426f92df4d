// Every example of the reference ("The permission chain" through "Subagent inheritance"), verbatim
// where it is code, with the behaviour the reference states.
import {
  compilePermissionChain,
  compilePermissionPreset,
  evaluatePermission,
  matchShellCommand,
  type PermissionConfig,
  type ProfilePermissions,
} from './index';

const deployService = { name: 'deploy_service', risk: 'execute' as const, needsApproval: true };
const searchIssues = { name: 'search_issues', risk: 'read' as const };
const httpFetch = { name: 'http_fetch', risk: 'network' as const };

describe('the engine example (defaults.permissions and the operator profile)', () => {
  const engineLayer: PermissionConfig = {
    hooks: [
      (toolName, input) => {
        if (toolName !== 'http_fetch') return undefined; // no verdict: fall through
        const { url } = input as { url: string };
        return url.startsWith('https://') ? undefined : 'deny';
      },
    ],
    deny: [{ risk: 'destructive' }],
    ask: [{ tool: ['deploy_service', 'send_email'] }, { risk: 'undeclared' }],
  };
  const operator: ProfilePermissions = { preset: 'standard', inheritPermissions: true };
  const chain = compilePermissionChain(engineLayer, operator, { profileName: 'operator' });

  it('the hook denies a plain-http fetch', async () => {
    const d = await evaluatePermission(chain, httpFetch, { url: 'http://example.com' });
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
  });

  it('the hook has no verdict for https and the chain falls through (standard asks on network)', async () => {
    const d = await evaluatePermission(chain, httpFetch, { url: 'https://example.com' });
    expect(d).toMatchObject({
      verdict: 'ask',
      decidedBy: 'ask-rule',
      rule: { source: 'preset:standard' },
    });
  });

  it('destructive tools are denied by the engine rule', async () => {
    const d = await evaluatePermission(chain, { name: 'drop_table', risk: 'destructive' }, {});
    expect(d).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { source: 'engine', risk: 'destructive' },
    });
  });

  it('deploy_service and send_email ask by name; undeclared risk asks', async () => {
    expect(await evaluatePermission(chain, deployService, { service: 'api' })).toMatchObject({
      verdict: 'ask',
      decidedBy: 'ask-rule',
      rule: { source: 'engine', tool: ['deploy_service', 'send_email'] },
    });
    expect(await evaluatePermission(chain, { name: 'mcp__github__list' }, {})).toMatchObject({
      verdict: 'ask',
      rule: { source: 'engine', risk: 'undeclared' },
    });
  });

  it('searchIssues (read) is allowed by the terminal default', async () => {
    expect(await evaluatePermission(chain, searchIssues, { q: 'bug' })).toMatchObject({
      verdict: 'allow',
      decidedBy: 'default',
    });
  });
});

describe('canUseTool example', () => {
  const permissions: PermissionConfig = {
    canUseTool: async (toolName, input) => {
      if (toolName !== 'deploy_service') return 'allow';
      const { service } = input as { service: string };
      // Explicit allow overrides the needsApproval ask default.
      return service === 'docs-preview' ? 'allow' : 'deny';
    },
  };
  const chain = compilePermissionChain(permissions);

  it('an explicit allow overrides the needsApproval ask default', async () => {
    expect(
      await evaluatePermission(chain, deployService, { service: 'docs-preview' }),
    ).toMatchObject({
      verdict: 'allow',
      decidedBy: 'canUseTool',
    });
  });

  it('denies other services', async () => {
    expect(await evaluatePermission(chain, deployService, { service: 'api' })).toMatchObject({
      verdict: 'deny',
      decidedBy: 'canUseTool',
    });
  });

  it('allows every other tool', async () => {
    expect(
      await evaluatePermission(chain, { name: 'other', needsApproval: true }, {}),
    ).toMatchObject({ verdict: 'allow' });
  });
});

describe('terminal default', () => {
  it('is allow, unless the tool declares needsApproval: true, in which case the verdict is ask', async () => {
    const chain = compilePermissionChain();
    expect(await evaluatePermission(chain, { name: 't' }, {})).toMatchObject({
      verdict: 'allow',
      decidedBy: 'default',
    });
    expect(await evaluatePermission(chain, { name: 't', needsApproval: true }, {})).toMatchObject({
      verdict: 'ask',
      decidedBy: 'default',
    });
  });
});

describe('presets: the reference table exactly', () => {
  const table = {
    read: ['allow', 'allow', 'allow'],
    write: ['ask', 'allow', 'allow'],
    network: ['ask', 'ask', 'allow'],
    execute: ['ask', 'ask', 'allow'],
    destructive: ['deny', 'ask', 'allow'],
    undeclared: ['ask', 'ask', 'allow'],
  } as const;
  const presets = ['strict', 'standard', 'open'] as const;

  for (const [risk, cells] of Object.entries(table)) {
    presets.forEach((preset, i) => {
      it(`${risk} under ${preset} is ${cells[i]}`, async () => {
        const chain = compilePermissionChain({}, { preset });
        const tool = risk === 'undeclared' ? { name: 't' } : { name: 't', risk: risk as 'read' };
        const d = await evaluatePermission(chain, tool, {});
        expect(d.verdict).toBe(cells[i]);
        if (cells[i] !== 'allow')
          expect(d.decidedBy).toBe(cells[i] === 'deny' ? 'deny-rule' : 'ask-rule');
      });
    });
  }

  it('open compiles to empty tables', () => {
    expect(compilePermissionPreset('open')).toEqual({ deny: [], ask: [] });
  });

  it('a needsApproval: true tool still asks under every preset', async () => {
    for (const preset of presets) {
      const chain = compilePermissionChain({}, { preset });
      const d = await evaluatePermission(
        chain,
        { name: 't', risk: 'read', needsApproval: true },
        {},
      );
      expect(d.verdict).toBe('ask');
    }
  });

  it('preset rules are appended after your own rules in the same layers', () => {
    const chain = compilePermissionChain(
      { ask: [{ tool: 'a' }] },
      { ask: [{ tool: 'b' }], preset: 'strict' },
    );
    expect(chain.ask.map((r) => r.description.source)).toEqual([
      'engine',
      'profile',
      'preset:strict',
    ]);
    expect(chain.deny.map((r) => r.description.source)).toEqual(['preset:strict']);
  });
});

describe('shell command matching examples', () => {
  it("matchShellCommand('npm test', { allow: ['npm test', 'npm run *'] }) is 'allow'", () => {
    expect(matchShellCommand('npm test', { allow: ['npm test', 'npm run *'] })).toBe('allow');
  });

  it("matchShellCommand('npm test; rm -rf /', { allow: ['npm test'] }) is 'ask'", () => {
    expect(matchShellCommand('npm test; rm -rf /', { allow: ['npm test'] })).toBe('ask');
  });

  it("matchShellCommand('git push --force', { deny: ['git push --force'] }) is 'deny'", () => {
    expect(matchShellCommand('git push --force', { deny: ['git push --force'] })).toBe('deny');
  });

  it('segments containing command substitution, process substitution, or here-docs always ask', () => {
    const tables = { allow: ['echo **', 'cat **', 'diff **'] };
    expect(matchShellCommand('echo $(id)', tables)).toBe('ask');
    expect(matchShellCommand('diff <(ls a) <(ls b)', tables)).toBe('ask');
    expect(matchShellCommand('cat <<EOF\nhi\nEOF', tables)).toBe('ask');
  });

  it("argv patterns appear in the chain as { tool: 'shell', argv: 'rm **' }", async () => {
    const chain = compilePermissionChain({ deny: [{ tool: 'shell', argv: 'rm **' }] });
    const shell = { name: 'shell', risk: 'execute' as const };
    expect(await evaluatePermission(chain, shell, { command: 'rm -rf /' })).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
    });
    expect(await evaluatePermission(chain, shell, { command: 'ls -la' })).toMatchObject({
      verdict: 'allow',
      decidedBy: 'default',
    });
  });
});

describe('dry-run evaluation example', () => {
  it('deploy_service asks under the standard preset with the matched rule and the post-hook input', async () => {
    const chain = compilePermissionChain(
      { deny: [{ risk: 'destructive' }] }, // engine layer
      { preset: 'standard' }, // profile layer
    );

    const verdict = await evaluatePermission(chain, deployService, { service: 'api' });
    // { verdict: 'ask', decidedBy: 'ask-rule', rule: { risk: [...] }, ... }
    // deploy_service declares risk 'execute', which the standard preset asks on
    expect(verdict).toMatchObject({
      verdict: 'ask',
      decidedBy: 'ask-rule',
      rule: { risk: expect.arrayContaining(['execute']) },
      input: { service: 'api' },
    });
  });
});

describe('subagent inheritance', () => {
  const engine: PermissionConfig = { deny: [{ risk: 'destructive' }] };
  const parent = compilePermissionChain(
    engine,
    { deny: [{ tool: 'send_email' }] },
    { profileName: 'orchestrator' },
  );

  it('is never implicit: without inheritPermissions a child gets its own profile plus the engine layer', async () => {
    const child = compilePermissionChain(
      engine,
      { preset: 'open' },
      { parent, profileName: 'worker' },
    );
    expect(
      await evaluatePermission(child, { name: 'send_email', risk: 'network' }, {}),
    ).toMatchObject({ verdict: 'allow' });
    expect(await evaluatePermission(child, { name: 'rm', risk: 'destructive' }, {})).toMatchObject({
      verdict: 'deny',
    });
  });

  it('inheritPermissions: true takes the parent chain, then the profile', async () => {
    const child = compilePermissionChain(
      engine,
      { inheritPermissions: true, ask: [{ tool: 'x' }] },
      { parent, profileName: 'worker' },
    );
    expect(
      await evaluatePermission(child, { name: 'send_email', risk: 'network' }, {}),
    ).toMatchObject({
      verdict: 'deny',
      rule: { source: 'profile:orchestrator' },
    });
    expect(await evaluatePermission(child, { name: 'x', risk: 'read' }, {})).toMatchObject({
      verdict: 'ask',
      rule: { source: 'profile:worker' },
    });
    // The engine layer is not added twice.
    expect(child.deny.filter((r) => r.description.source === 'engine')).toHaveLength(1);
  });

  it('defaults to false', async () => {
    const child = compilePermissionChain(engine, {}, { parent });
    expect(await evaluatePermission(child, { name: 'send_email' }, {})).toMatchObject({
      verdict: 'allow',
    });
  });
});
