import { ErrorCode, ToolgateError, type ToolRef } from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';

/**
 * The tool a tenant's call names, as `requested` journals it and the permission chain decides on
 * it. The policy dry run takes it from here too, so it evaluates exactly what a dispatch would.
 */
export async function resolveToolRef(
  registry: ToolRegistry,
  tenant: string,
  name: string,
): Promise<ToolRef> {
  const tool = await registry.resolveFresh(tenant, name);
  if (!tool) {
    throw new ToolgateError(ErrorCode.UnknownTool, `unknown tool ${name}`, {
      details: { tool: name },
    });
  }
  return {
    name: tool.name,
    contractHash: tool.contractHash,
    needsApproval: tool.policy.needsApproval,
    executor: tool.policy.executor,
    ...(tool.policy.risk ? { risk: tool.policy.risk } : {}),
    ...(tool.policy.timeoutMs ? { timeoutMs: tool.policy.timeoutMs } : {}),
    ...(tool.policy.clearance ? { clearance: tool.policy.clearance } : {}),
  };
}
