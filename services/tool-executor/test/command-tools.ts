import { contractHash, type ArgvElement, type RegisteredTool } from '@toolgate/contracts';
import type { PendingCall } from '../src/execution/pending-call';
import type { CommandToolOptions } from '../src/subprocess/command-call';

/**
 * Registered command tools for the `subprocess` and `container` executors' specs: a plain map
 * stands in for the registry (the pipeline tests run the real one over NATS), tools are made and
 * registered for tenant acme, and domain checks are recorded (`localhost` is the only host allowed).
 */
export function commandTools(
  executor: 'subprocess' | 'container',
  policyDefaults: Partial<RegisteredTool['policy']> = {},
) {
  const registered = new Map<string, RegisteredTool>();
  const domainChecks: string[] = [];

  const options: Pick<CommandToolOptions, 'lookup' | 'checkDomain'> = {
    lookup: async (tenant, name, hash) => {
      const tool = registered.get(`${tenant}.${name}`);
      return tool && contractHash(tool) === hash ? tool : undefined;
    },
    checkDomain: (_call, host) => {
      domainChecks.push(host);
      return host === 'localhost' ? 'allow' : 'deny';
    },
  };

  /** A tool taking `{ name: string }` that runs `argv`; `policy` overrides the defaults. */
  function tool(
    name: string,
    argv: ArgvElement[],
    policy: Partial<RegisteredTool['policy']> = {},
  ): RegisteredTool {
    return {
      name,
      description: `${name} test tool`,
      parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      policy: { needsApproval: false, executor, command: { argv }, ...policyDefaults, ...policy },
    };
  }

  /** Registers `tool` for tenant acme and returns a decided call of it with `input`. */
  function callOf(
    tool: RegisteredTool,
    input: unknown,
    extra: Partial<PendingCall> = {},
  ): PendingCall {
    registered.set(`acme.${tool.name}`, tool);
    return {
      tenant: 'acme',
      runId: 'run-1',
      dispatchId: 'd-1',
      tool: {
        name: tool.name,
        contractHash: contractHash(tool),
        needsApproval: false,
        executor,
        ...(tool.policy.risk ? { risk: tool.policy.risk } : {}),
      },
      input,
      agent: { agentType: 'tester' },
      isolation: 'none',
      causationId: 'c-1',
      decidedBy: 'default',
      ...extra,
    };
  }

  return {
    registered,
    domainChecks,
    options,
    tool,
    callOf,
    /** Forgets every registration and domain check (each test starts from none). */
    reset(): void {
      registered.clear();
      domainChecks.length = 0;
    },
  };
}
