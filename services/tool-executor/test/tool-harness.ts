import type { Isolation, ToolContext, WireError } from '@toolgate/contracts';
import type { ToolDef, ToolRunOutcome } from '@toolgate/tools';
import { createBuiltinTools, type BuiltinToolsOptions } from '../src/builtins';

/** The context a dispatch gives a builtin: `cwd` and isolation as the executor resolved them. */
export function toolContext(
  cwd: string,
  options: { isolation?: Isolation; signal?: AbortSignal } = {},
): Omit<ToolContext, 'signal'> & { signal?: AbortSignal } {
  return {
    runId: 'run-1',
    dispatchId: 'dispatch-1',
    spanId: '0123456789abcdef',
    agent: { agentType: 'tester' },
    cwd,
    isolation: options.isolation ?? 'none',
    log: () => undefined,
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

/** One builtin, by name, bound to `options` (without a sandbox unless the test gives one). */
export function builtin(
  name: string,
  options: Omit<BuiltinToolsOptions, 'sandbox' | 'files'> &
    Partial<Pick<BuiltinToolsOptions, 'sandbox' | 'files'>>,
): ToolDef {
  const found = createBuiltinTools({ sandbox: null, files: null, ...options }).find(
    (t) => t.contract.name === name,
  );
  if (!found) throw new Error(`no builtin named ${name}`);
  return found;
}

/** The result of an outcome that must be ok; fails the test with the error otherwise. */
export function ok<T = unknown>(outcome: ToolRunOutcome): T {
  if (!outcome.ok) throw new Error(`expected ok, got ${JSON.stringify(outcome.error)}`);
  return outcome.result as T;
}

/** The error of an outcome that must have failed; fails the test with the result otherwise. */
export function errorOf(outcome: ToolRunOutcome): WireError {
  if (outcome.ok) throw new Error(`expected an error, got ${JSON.stringify(outcome.result)}`);
  return outcome.error;
}
