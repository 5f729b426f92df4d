import {
  ConfigError,
  inputDigest,
  journalEvent,
  type DecidedEvent,
  type RequestedEvent,
  type Taint,
  WHATIF_CHANGES_BUDGET_BYTES,
} from '@toolgate/contracts';
import { PolicyReplay, type RecordedCall } from './policy-replay';
import { WhatIfTally, WHATIF_HOOKS_NOTE } from './whatif-report';

const HASH = 'a'.repeat(64);
let seq = 0;

/** A recorded call: its `requested` and the `decided` the chain journaled for it then. */
function recorded(opts: {
  tool?: string;
  risk?: 'read' | 'write' | 'network' | 'execute' | 'destructive';
  input: unknown;
  postHookInput?: unknown;
  taint?: Taint;
  profile?: string;
  verdict?: 'allow' | 'deny' | 'ask';
  decidedBy?: DecidedEvent['decidedBy'];
  rule?: unknown;
  reason?: string;
  revision?: number;
}): RecordedCall {
  seq += 2;
  const dispatchId = `d${seq}`;
  const tool = {
    name: opts.tool ?? 'shell',
    contractHash: HASH,
    needsApproval: false,
    executor: 'inprocess' as const,
    ...(opts.risk ? { risk: opts.risk } : {}),
  };
  const base = { tenant: 'acme', runId: 'r1', dispatchId, at: '2026-01-01T00:00:00.000Z' };
  const agent = { agentType: 'coder' };
  const requested: RequestedEvent = journalEvent<'requested'>({
    ...base,
    type: 'requested',
    id: `${dispatchId}:requested`,
    causationId: null,
    callId: `c${seq}`,
    tool,
    input: opts.input,
    agent,
    isolation: 'none',
    ...(opts.profile ? { profile: opts.profile } : {}),
    ...(opts.taint ? { taint: opts.taint } : {}),
    submittedBy: 'someone',
  });
  const post = opts.postHookInput ?? opts.input;
  const decided: DecidedEvent = journalEvent<'decided'>({
    ...base,
    type: 'decided',
    id: `${dispatchId}:decided`,
    causationId: requested.id,
    verdict: opts.verdict ?? 'allow',
    decidedBy: opts.decidedBy ?? 'default',
    ...(opts.rule !== undefined ? { rule: opts.rule } : {}),
    ...(opts.reason ? { reason: opts.reason } : {}),
    policyRevision: opts.revision ?? 3,
    inputDigest: inputDigest(post),
    input: post,
    tool,
    agent,
    isolation: 'none',
    ...(opts.profile ? { profile: opts.profile } : {}),
  });
  return { requested, decided, seq };
}

describe('PolicyReplay', () => {
  it('reports a verdict the candidate changes, with the rule on each side', async () => {
    const replay = PolicyReplay.compile({
      engine: { deny: [{ tool: 'shell', argv: 'rm **', reason: 'no deleting' }] },
    });
    const call = recorded({ input: { command: 'rm -rf build' } });
    expect(await replay.replay(call)).toEqual({
      kind: 'replayed',
      before: { verdict: 'allow', decidedBy: 'default', policyRevision: 3 },
      after: {
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: expect.objectContaining({ source: 'engine', tool: 'shell', argv: 'rm **' }),
        reason: 'no deleting',
      },
      changed: true,
    });
    const same = await replay.replay(recorded({ input: { command: 'ls' } }));
    expect(same).toMatchObject({ kind: 'replayed', changed: false, after: { verdict: 'allow' } });
  });

  it('decides on the post-hook input the journal recorded, not the input as submitted', async () => {
    const replay = PolicyReplay.compile({
      engine: { ask: [{ tool: 'shell', argv: 'git push **' }] },
    });
    const rewritten = recorded({
      input: { command: 'echo harmless' },
      postHookInput: { command: 'git push origin main' },
    });
    expect(await replay.replay(rewritten)).toMatchObject({
      after: { verdict: 'ask', decidedBy: 'ask-rule' },
      changed: true,
    });
  });

  it('keeps the recorded taint, profile and tool risk', async () => {
    const replay = PolicyReplay.compile({
      engine: { deny: [{ risk: 'destructive' }] },
      profiles: { ci: { deny: [{ tool: 'read_file' }] } },
    });
    const tainted = recorded({
      tool: 'http_fetch',
      risk: 'network',
      input: { url: 'https://paste.example/x' },
      taint: 'private',
    });
    expect(await replay.replay(tainted)).toMatchObject({
      after: { verdict: 'deny', rule: { source: 'taint-gate', taint: 'private' } },
    });
    const untainted = recorded({
      tool: 'http_fetch',
      risk: 'network',
      input: { url: 'https://paste.example/x' },
    });
    expect(await replay.replay(untainted)).toMatchObject({ changed: false });
    expect(
      await replay.replay(recorded({ tool: 'drop', risk: 'destructive', input: {} })),
    ).toMatchObject({ after: { verdict: 'deny', rule: { risk: 'destructive' } } });
    expect(
      await replay.replay(recorded({ tool: 'read_file', risk: 'read', input: {}, profile: 'ci' })),
    ).toMatchObject({ after: { verdict: 'deny', rule: { source: 'profile:ci' } } });
    expect(
      await replay.replay(recorded({ tool: 'read_file', risk: 'read', input: {} })),
    ).toMatchObject({ changed: false });
  });

  it('denies a call whose profile the candidate no longer defines, as the evaluator would', async () => {
    const replay = PolicyReplay.compile({});
    expect(
      await replay.replay(recorded({ tool: 'read_file', input: {}, profile: 'gone' })),
    ).toMatchObject({
      after: {
        verdict: 'deny',
        decidedBy: 'default',
        reason: expect.stringContaining('unknown permission profile "gone"'),
      },
      changed: true,
    });
  });

  describe('remote hooks are never called', () => {
    const byGuard = () =>
      recorded({
        input: { command: 'ls' },
        verdict: 'deny',
        decidedBy: 'hook',
        rule: { source: 'engine', kind: 'hook', index: 0, name: 'remote:guard' },
        reason: "permission hook 'remote:guard' returned deny",
      });

    it('reuses the verdict a hook recorded when the candidate keeps that hook', async () => {
      const replay = PolicyReplay.compile({
        remote: { engine: { hooks: [{ name: 'guard', unauthenticated: true }] } },
      });
      expect(await replay.replay(byGuard())).toMatchObject({
        before: { verdict: 'deny', decidedBy: 'hook' },
        after: { verdict: 'deny', decidedBy: 'hook', rule: { name: 'remote:guard' } },
        changed: false,
        hooks: 'reused',
      });
    });

    it('decides by the rules when the candidate drops the hook that decided', async () => {
      const replay = PolicyReplay.compile({});
      const result = await replay.replay(byGuard());
      expect(result).toMatchObject({
        after: { verdict: 'allow', decidedBy: 'default' },
        changed: true,
      });
      expect(result).not.toHaveProperty('hooks');
    });

    it('marks a call whose recorded decision came from another hook as depending on a hook', async () => {
      const replay = PolicyReplay.compile({
        engine: { ask: [{ tool: 'shell' }] },
        remote: { engine: { hooks: [{ name: 'other', unauthenticated: true }] } },
      });
      expect(await replay.replay(byGuard())).toMatchObject({
        after: { verdict: 'ask', decidedBy: 'ask-rule' },
        changed: true,
        hooks: 'unknown',
      });
    });

    it('lets hooks pass a call the record shows went past them', async () => {
      const replay = PolicyReplay.compile({
        remote: { engine: { hooks: [{ name: 'guard', unauthenticated: true }] } },
      });
      const passed = await replay.replay(recorded({ input: { command: 'ls' } }));
      expect(passed).toMatchObject({ changed: false });
      expect(passed).not.toHaveProperty('hooks');
    });

    it('reuses canUseTool when it decided, and marks it unknown when a rule decided first', async () => {
      const replay = PolicyReplay.compile({
        remote: { engine: { canUseTool: { name: 'gate', unauthenticated: true } } },
      });
      const byGate = recorded({
        input: { command: 'ls' },
        verdict: 'deny',
        decidedBy: 'canUseTool',
        rule: { source: 'engine', kind: 'canUseTool' },
      });
      expect(await replay.replay(byGate)).toMatchObject({
        after: { verdict: 'deny', decidedBy: 'canUseTool' },
        changed: false,
        hooks: 'reused',
      });
      const byRule = recorded({
        input: { command: 'ls' },
        verdict: 'ask',
        decidedBy: 'ask-rule',
        rule: { source: 'engine', kind: 'rule', layer: 'ask', index: 0, tool: ['shell'] },
      });
      expect(await replay.replay(byRule)).toMatchObject({
        after: { verdict: 'allow', decidedBy: 'default' },
        changed: true,
        hooks: 'unknown',
      });
      const byDefault = await replay.replay(recorded({ input: { command: 'ls' } }));
      expect(byDefault).toMatchObject({ changed: false });
      expect(byDefault).not.toHaveProperty('hooks');
    });
  });

  it("does not replay the error cap's refusals: they are not the chain's decisions", async () => {
    const replay = PolicyReplay.compile({});
    const capped = recorded({
      input: { command: 'ls' },
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { source: 'error-cap', kind: 'error-cap', errorCap: { failures: 5, consecutive: 5 } },
    });
    expect(await replay.replay(capped)).toEqual({ kind: 'error-cap' });
  });

  it('refuses a candidate a policy put would refuse', () => {
    expect(() => PolicyReplay.compile({ engine: { deny: [{ tool: 'shell', argv: '' }] } })).toThrow(
      ConfigError,
    );
    expect(() => PolicyReplay.compile({ engine: { bogus: true } })).toThrow(/bogus/);
  });
});

describe('WhatIfTally', () => {
  it('lists changes within a byte budget, whatever the limit and the recorded calls hold', async () => {
    const replay = PolicyReplay.compile({ engine: { deny: [{ tool: 'shell' }] } });
    const tally = new WhatIfTally(10_000);
    for (let i = 0; i < 1_500; i++) {
      const call = recorded({ input: { command: 'ls' }, reason: 'r'.repeat(1_000) });
      tally.add(call, await replay.replay(call));
    }
    const report = tally.report();
    const bytes = Buffer.byteLength(JSON.stringify(report.changes));
    expect(report.changed).toBe(1_500);
    expect(report.changes.length).toBeGreaterThan(0);
    expect(report.changes.length).toBeLessThan(1_500);
    expect(bytes).toBeLessThanOrEqual(WHATIF_CHANGES_BUDGET_BYTES);
    expect(report.truncated).toBe(true);
  });

  it('counts every call by tool and by change, and lists changes up to the limit in stream order', async () => {
    const replay = PolicyReplay.compile({
      engine: { deny: [{ tool: 'shell', argv: 'rm **' }], ask: [{ tool: 'write_file' }] },
    });
    const tally = new WhatIfTally(2, { runId: 'r1' });
    const calls = [
      recorded({ input: { command: 'rm a' } }),
      recorded({ input: { command: 'ls' } }),
      recorded({ tool: 'write_file', risk: 'write', input: { path: 'x' } }),
      recorded({ input: { command: 'rm b' } }),
      recorded({
        input: { command: 'rm c' },
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: { source: 'error-cap', kind: 'error-cap', errorCap: { failures: 5, consecutive: 5 } },
      }),
    ];
    // Added out of order, as two joined consumers deliver them.
    for (const call of [calls[3]!, calls[0]!, calls[1]!, calls[2]!, calls[4]!]) {
      tally.saw(call.seq);
      tally.add(call, await replay.replay(call));
    }
    tally.addUndecided(2);
    const report = tally.report();
    expect(report).toMatchObject({
      window: { firstSeq: calls[0]!.seq, lastSeq: calls[4]!.seq, runId: 'r1' },
      calls: 4,
      changed: 3,
      unchanged: 1,
      skipped: { undecided: 2, errorCap: 1 },
      hooks: { reused: 0, unknown: 0, note: WHATIF_HOOKS_NOTE },
      byTool: [
        { tool: 'shell', calls: 3, changed: 2 },
        { tool: 'write_file', calls: 1, changed: 1 },
      ],
      byChange: [
        { from: 'allow', to: 'deny', count: 2 },
        { from: 'allow', to: 'ask', count: 1 },
      ],
      truncated: true,
    });
    // The first two changes added, listed by sequence.
    expect(report.changes.map((c) => c.seq)).toEqual([calls[0]!.seq, calls[3]!.seq]);
    expect(report.changes[0]).toMatchObject({
      dispatchId: calls[0]!.decided.dispatchId,
      runId: 'r1',
      callId: calls[0]!.requested.callId,
      tool: 'shell',
      agent: { agentType: 'coder' },
      before: { verdict: 'allow', policyRevision: 3 },
      after: { verdict: 'deny', decidedBy: 'deny-rule' },
    });
  });
});
