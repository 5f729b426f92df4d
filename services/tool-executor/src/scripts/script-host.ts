import {
  ErrorCode,
  fromWireError,
  InvalidArgumentsError,
  ToolgateError,
  type Risk,
  type ScriptHostFunction,
  type Taint,
  type ToolContext,
  type ToolRef,
} from '@toolgate/contracts';
import type { HostFunction } from '@toolgate/script-tools';
import { runTool, type ToolDef } from '@toolgate/tools';
import { callScope, hostToolScope } from '../execution/call-scope';
import type { PendingCall } from '../execution/pending-call';

/** The chain's answer for one host call (a `PermissionDecision` fits). */
export interface HostCallDecision {
  verdict: 'allow' | 'deny' | 'ask';
  reason?: string;
  /** The post-hook input: what the builtin runs with. */
  input: unknown;
}

/** The facts of the builtin a host call goes through, as the chain decides on them. */
export interface HostCallTool {
  name: string;
  risk?: Risk;
  needsApproval: boolean;
  clearance?: Taint;
}

/**
 * Decides a script's host call with the permission chain of the script call's tenant and profile,
 * as if the agent had called the builtin itself (hooks, deny and ask rules, protected paths, domain
 * rules, canUseTool). Anything but `allow` refuses the host call.
 */
export type DecideHostCall = (
  call: PendingCall,
  tool: HostCallTool,
  input: unknown,
) => Promise<HostCallDecision>;

/** Which builtin each host function runs through. */
const HOST_BUILTIN: Readonly<Record<ScriptHostFunction, string>> = {
  read_file: 'read_file',
  write_file: 'write_file',
  http_get: 'http_fetch',
  shell: 'shell',
};

export interface HostFunctionsOptions {
  call: PendingCall;
  /** The script call's context; each host call runs the builtin with it. */
  ctx: Omit<ToolContext, 'signal'>;
  builtins: ReadonlyMap<string, ToolDef>;
  /** Absent: every host call is refused (there is no policy to ask). */
  decide?: DecideHostCall;
}

/**
 * The host functions of one script call: exactly those its `@requires` names. Each one is the
 * builtin it names, run as the builtin runs for an agent — first decided by the permission chain
 * (an `ask` refuses: a script cannot wait for an approval), then through the builtin's own checks
 * (read and write scopes, protected paths on disk, the domain rules on every connection, the shell
 * sandbox) in the call's scope. A refusal reaches the script as an error with `code`.
 */
export function scriptHostFunctions(
  requires: readonly ScriptHostFunction[],
  options: HostFunctionsOptions,
): Record<string, HostFunction> {
  const run = (fn: ScriptHostFunction, input: Record<string, unknown>, signal: AbortSignal) =>
    hostCall(fn, input, signal, options);
  const all: Record<ScriptHostFunction, HostFunction> = {
    read_file: async ([path], signal) => {
      const result = (await run('read_file', { path: text(path, 'path') }, signal)) as {
        content: string;
        truncated: boolean;
      };
      if (result.truncated) {
        throw new ToolgateError(
          ErrorCode.TooLarge,
          `${String(path)} is larger than the read limit; only whole files are read`,
        );
      }
      return result.content;
    },
    write_file: ([path, content], signal) =>
      run('write_file', { path: text(path, 'path'), content: text(content, 'content') }, signal),
    http_get: ([url], signal) => run('http_get', { url: text(url, 'url'), method: 'GET' }, signal),
    shell: ([command], signal) => run('shell', { command: text(command, 'command') }, signal),
  };
  const granted: Record<string, HostFunction> = {};
  for (const fn of requires) granted[fn] = all[fn];
  return granted;
}

async function hostCall(
  fn: ScriptHostFunction,
  input: Record<string, unknown>,
  signal: AbortSignal,
  { call, ctx, builtins, decide }: HostFunctionsOptions,
): Promise<unknown> {
  const def = builtins.get(HOST_BUILTIN[fn]);
  if (!def) {
    throw new ToolgateError(ErrorCode.ExecutorUnregistered, `no ${HOST_BUILTIN[fn]} builtin here`);
  }
  if (!decide) {
    throw new ToolgateError(
      ErrorCode.Denied,
      'host calls are refused: no policy decides them here',
    );
  }
  // The builtin's own bounds first (a path of 4 KiB, a URL of 8 KiB, …): the chain below matches
  // the input against protected paths and rules on this thread, which a 2 MiB path from a script
  // held for seconds, every tenant's calls waiting behind it.
  const validated = await def.schema.validate(input);
  if (!validated.ok) throw new InvalidArgumentsError(def.contract.name, validated.issues);
  const builtin = {
    name: def.contract.name,
    ...(def.policy.risk ? { risk: def.policy.risk } : {}),
    needsApproval: def.policy.needsApproval,
    ...(def.policy.clearance ? { clearance: def.policy.clearance } : {}),
  };
  let decision: HostCallDecision;
  try {
    decision = await decide(call, builtin, input);
  } catch {
    decision = { verdict: 'deny', reason: 'the policy could not be evaluated', input };
  }
  if (decision.verdict !== 'allow') {
    const why = decision.reason ? `: ${decision.reason}` : '';
    throw new ToolgateError(
      ErrorCode.Denied,
      decision.verdict === 'ask'
        ? `the policy asks for an approval, which a script cannot wait for${why}`
        : `the policy denies it${why}`,
      { details: { verdict: decision.verdict, tool: def.contract.name } },
    );
  }
  // Its connections (each resolved address, each redirect) pass the builtin's domain rules too.
  const hostTool: ToolRef = {
    contractHash: call.tool.contractHash,
    executor: 'inprocess',
    ...builtin,
  };
  const outcome = await callScope.run(call, () =>
    hostToolScope.run(hostTool, () => runTool(def, decision.input, { ...ctx, signal })),
  );
  if (!outcome.ok) throw fromWireError(outcome.error);
  return outcome.result;
}

function text(value: unknown, name: string): string {
  if (typeof value !== 'string')
    throw new ToolgateError(ErrorCode.InvalidArguments, `${name} must be a string`);
  return value;
}
