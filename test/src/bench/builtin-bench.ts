import type { Sandbox } from '@toolgate/sandbox';
import { createBuiltinTools, type FileScopePool } from '@toolgate/tool-executor';
import type { ToolDef } from '@toolgate/tools';

/**
 * One builtin by name, as the executor builds it for a call pinned to `cwd` (no domain allowed):
 * `files` null runs the file builtins in the bench's own process, a pool runs them in its helpers.
 */
export function benchBuiltin(
  name: string,
  cwd: string,
  deps: { sandbox: Sandbox | null; files: FileScopePool | null },
): ToolDef {
  const found = createBuiltinTools({ policy: { cwd }, checkDomain: () => 'deny', ...deps }).find(
    (t) => t.contract.name === name,
  );
  if (!found) throw new Error(`bench: no ${name} builtin`);
  return found;
}

/** The context a dispatch gives a builtin running in `cwd`. */
export function benchToolContext(cwd: string) {
  return {
    runId: 'bench',
    dispatchId: 'bench',
    spanId: '0123456789abcdef',
    agent: { agentType: 'bench' },
    cwd,
    isolation: 'none' as const,
    log: () => undefined,
  };
}
