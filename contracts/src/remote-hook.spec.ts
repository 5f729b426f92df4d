import { RemoteHookReplySchema, RemoteHookRequestSchema } from './remote-hook';

describe('remote hook shapes', () => {
  it('reads each answer a hook may give', () => {
    expect(RemoteHookReplySchema.parse({})).toEqual({});
    expect(RemoteHookReplySchema.parse({ verdict: 'ask', reason: 'x' })).toEqual({
      verdict: 'ask',
      reason: 'x',
    });
    expect(RemoteHookReplySchema.parse({ modifiedInput: null })).toEqual({ modifiedInput: null });
    expect(RemoteHookReplySchema.parse({ verdict: 'deny', modifiedInput: { a: 1 } })).toEqual({
      verdict: 'deny',
      modifiedInput: { a: 1 },
    });
  });

  it.each<[string, unknown]>([
    ['an unknown verdict', { verdict: 'maybe' }],
    ['a mistyped field (decision for verdict)', { decision: 'deny' }],
    ['a verdict with a field it does not declare', { verdict: 'allow', note: 'x' }],
    ['an array', [1]],
    ['a string', 'allow'],
    [
      'a modified input nested deeper than the limit',
      {
        modifiedInput: Array.from({ length: 150 }).reduce<unknown>((inner) => [inner], 0),
      },
    ],
  ])('refuses %s (the chain then denies)', (_what, reply) => {
    expect(RemoteHookReplySchema.safeParse(reply).success).toBe(false);
  });

  it('describes the request the evaluator sends', () => {
    const request = {
      kind: 'hook',
      tenant: 'acme',
      toolName: 'shell',
      input: { command: 'ls' },
      context: { agent: { agentType: 'coder' }, tool: { name: 'shell', needsApproval: false } },
    };
    expect(RemoteHookRequestSchema.parse(request)).toEqual(request);
    expect(RemoteHookRequestSchema.safeParse({ ...request, kind: 'other' }).success).toBe(false);
  });
});
