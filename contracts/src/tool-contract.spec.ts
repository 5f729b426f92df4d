import {
  ExecutorKindSchema,
  RegisteredToolSchema,
  RiskSchema,
  TOOL_NAME_PATTERN,
  ToolContractSchema,
  ToolNameSchema,
  ToolPolicySchema,
} from './tool-contract';

const contract = {
  name: 'deploy_service',
  description: 'Deploy a service to production.',
  parameters: { type: 'object', properties: { service: { type: 'string' } } },
};

describe('tool contract schemas', () => {
  it.each(['', 'a'.repeat(65), 'a.b', 'a b', '*', '>', 'wérk', '工具', 'a\n', '\tx'])(
    'refuse the tool name %j',
    (name) => {
      expect(TOOL_NAME_PATTERN.test(name)).toBe(false);
      expect(ToolNameSchema.safeParse(name).success).toBe(false);
      expect(ToolContractSchema.safeParse({ ...contract, name }).success).toBe(false);
    },
  );

  it('accept names of 1 to 64 characters of [a-zA-Z0-9_-]', () => {
    for (const name of ['a', 'Z'.repeat(64), 'deploy_service', 'get-weather', '42']) {
      expect(ToolNameSchema.parse(name)).toBe(name);
    }
  });

  it('keep an absent version absent: no default is synthesised', () => {
    const parsed = ToolContractSchema.parse(contract);
    expect('version' in parsed).toBe(false);
    expect(ToolContractSchema.parse({ ...contract, version: '2' }).version).toBe('2');
  });

  it('keep policy out of the contract: a contract with policy fields is refused', () => {
    for (const extra of [{ risk: 'read' }, { needsApproval: true }, { executor: 'remote' }]) {
      expect(ToolContractSchema.safeParse({ ...contract, ...extra }).success).toBe(false);
    }
  });

  it('default the policy to no approval and the in-process executor', () => {
    expect(ToolPolicySchema.parse({})).toEqual({ needsApproval: false, executor: 'inprocess' });
    const registered = RegisteredToolSchema.parse({ ...contract, policy: { risk: 'execute' } });
    expect(registered.policy).toEqual({
      risk: 'execute',
      needsApproval: false,
      executor: 'inprocess',
    });
  });

  it('know the risk classes and executor kinds', () => {
    expect(RiskSchema.options).toEqual(['read', 'write', 'network', 'execute', 'destructive']);
    expect(ExecutorKindSchema.options).toEqual([
      'inprocess',
      'subprocess',
      'remote',
      'script',
      'container',
      'mcp',
    ]);
    expect(ToolPolicySchema.safeParse({ risk: 'harmless' }).success).toBe(false);
    expect(ToolPolicySchema.safeParse({ executor: 'cloud' }).success).toBe(false);
    expect(ToolPolicySchema.safeParse({ timeoutMs: 0 }).success).toBe(false);
  });
});
