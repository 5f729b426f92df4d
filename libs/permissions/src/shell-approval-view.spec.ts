import {
  compilePermissionChain,
  evaluatePermission,
  shellApprovalView,
  type PermissionConfig,
} from './index';

const shell = { name: 'shell', risk: 'execute' as const };

/** Decides `command` with the real chain and explains the ask from the rule it recorded. */
async function explainAsk(config: PermissionConfig, command: string) {
  const chain = compilePermissionChain(config);
  const decision = await evaluatePermission(chain, shell, { command });
  expect(decision.verdict).toBe('ask');
  // The rule travels through the journal as JSON: explain what a reader gets back.
  return shellApprovalView(command, JSON.parse(JSON.stringify(decision.rule ?? null)));
}

const marked = (view: ReturnType<typeof shellApprovalView>) =>
  view?.segments.filter((s) => s.asked).map((s) => s.argv.join(' '));

describe('shellApprovalView', () => {
  it('marks the segment an argv ask rule matched, and only that one', async () => {
    const view = await explainAsk(
      { ask: [{ tool: 'shell', argv: 'git push **' }] },
      "git status && git push origin 'main' | tee out.txt",
    );
    expect(view).toMatchObject({ scope: 'segments' });
    expect(view!.segments.map((s) => s.argv)).toEqual([
      ['git', 'status'],
      ['git', 'push', 'origin', 'main'],
      ['tee', 'out.txt'],
    ]);
    expect(marked(view)).toEqual(['git push origin main']);
    expect(view!.segments[1]!.why).toBe('matches git push **');
  });

  it('sees a matched program through a wrapper and sh -c, as the chain does', async () => {
    const view = await explainAsk(
      { ask: [{ tool: 'shell', argv: 'rm **' }] },
      "ls; timeout 5 sh -c 'rm -rf build'",
    );
    expect(marked(view)).toEqual(['timeout 5 sh -c rm -rf build']);
  });

  it('marks the segments that cannot be checked when an argv rule could not tell', async () => {
    const view = await explainAsk(
      { deny: [{ tool: 'shell', argv: 'rm **' }] },
      'echo ok; python3 -c "import os"',
    );
    expect(marked(view)).toEqual(['python3 -c import os']);
    expect(view!.segments[1]).toMatchObject({ asked: true, unmatchable: expect.any(String) });
    expect(view!.segments[1]!.why).toMatch(/^cannot be checked: /);
    expect(view!.segments[0]).toMatchObject({ asked: false, why: null, unmatchable: null });
  });

  it('marks the segment that writes a protected path', async () => {
    const view = await explainAsk({}, 'echo hi; echo x > .git/config; ls');
    expect(view).toMatchObject({ scope: 'segments' });
    expect(marked(view)).toEqual(['echo x > .git/config']);
    expect(view!.segments[1]!.why).toContain('.git');
  });

  it('marks the segment that runs code the matcher cannot read under a deny rule', async () => {
    const view = await explainAsk(
      { deny: [{ tool: 'shell', argv: 'rm **' }] },
      'ls; cp /bin/rm x && ./x victim; make',
    );
    expect(marked(view)).toEqual(['./x victim', 'make']);
    expect(view!.segments[3]!.why).toMatch(/cannot read .*Makefile.*rm \*\*/);
  });

  it('marks the write that a cd moved onto a protected path', async () => {
    const view = await explainAsk({}, 'cd .vscode && printf x > settings.json');
    expect(marked(view)).toEqual(['printf x > settings.json']);
    expect(view!.segments[1]!.why).toContain('.vscode/settings.json');
  });

  it('marks the segment whose write target is not a literal path', async () => {
    const view = await explainAsk({}, 'ls; echo x > "$OUT"');
    expect(marked(view)).toEqual(['echo x > $OUT']);
  });

  it('marks no segment when the rule covers the whole call', async () => {
    const byTool = await explainAsk({ ask: [{ tool: 'shell' }] }, 'ls; pwd');
    expect(byTool).toMatchObject({ scope: 'call' });
    expect(marked(byTool)).toEqual([]);
    const byRisk = await explainAsk({ ask: [{ risk: 'execute' }] }, 'ls');
    expect(byRisk).toMatchObject({ scope: 'call', segments: [{ argv: ['ls'], asked: false }] });
    const byHook = await explainAsk({ hooks: [() => 'ask'] }, 'ls');
    expect(byHook).toMatchObject({ scope: 'call' });
  });

  it('is total: odd rules, odd commands', () => {
    expect(shellApprovalView(42, null)).toBeNull();
    expect(shellApprovalView('ls', undefined)).toMatchObject({ scope: 'call' });
    expect(shellApprovalView('ls', { kind: 'rule', argv: [42, '[unclosed'] })).toMatchObject({
      scope: 'segments',
      segments: [{ argv: ['ls'], asked: false }],
    });
    expect(shellApprovalView('', { kind: 'rule', argv: 'x' })).toEqual({
      command: '',
      scope: 'segments',
      segments: [],
    });
  });
});
