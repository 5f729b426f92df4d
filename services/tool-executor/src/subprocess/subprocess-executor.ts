import { ErrorCode, toWireError } from '@toolgate/contracts';
import type { Sandbox } from '@toolgate/sandbox';
import type { ToolRunOutcome } from '@toolgate/tools';
import { failedOutcome, type CallExecutor, type CallRun } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import { callEgress, commandLaunch, decidedTool, type CommandToolOptions } from './command-call';
import { runHoldingProtectedPaths } from './protected-binds';
import { subprocessOutcome } from './subprocess-outcome';

export interface SubprocessExecutorOptions extends CommandToolOptions {
  sandbox: Sandbox;
  /** The environment every tool process starts from: the operator's allowlist applied to the host's. */
  baseEnv: Readonly<Record<string, string>>;
}

const MIB = 1024 * 1024;

/**
 * The `subprocess` executor: one sandboxed process per call, running the tool's registered argv
 * with the call's input as JSON on stdin and taking its result as JSON from stdout (the protocol
 * is {@link subprocessOutcome}'s table). Input arrives validated against the contract; the argv
 * template only ever fills whole arguments. Network only for a tool of risk `network` whose
 * declared hosts all pass the call's domain rules, and then only through the call's egress
 * proxy ({@link callEgress}): the process keeps a network namespace of its own, and reaches its declared
 * hosts (their addresses checked as `http_fetch` checks them) through the proxy port its
 * environment names, and nothing else.
 */
export class SubprocessExecutor implements CallExecutor {
  constructor(private readonly options: SubprocessExecutorOptions) {}

  async run(call: PendingCall, { cwd, timeoutMs, signal }: CallRun): Promise<ToolRunOutcome> {
    const name = call.tool.name;
    try {
      const decided = await decidedTool(call, this.options.lookup);
      if (!decided.ok) return decided;
      const command = decided.tool.policy.command;
      if (!command) return failedOutcome(ErrorCode.Config, `${name} has no command to run`);
      const launch = await commandLaunch(call, command, this.options, timeoutMs);
      if (!launch.ok) return launch;
      const { limits } = launch;
      const egress = launch.network ? await callEgress(call, command, this.options) : undefined;
      const result = await runHoldingProtectedPaths(
        this.options.sandbox,
        this.options.protectedPaths(call),
        {
          argv: launch.argv,
          cwd,
          writable: call.isolation !== 'readonly',
          ...(egress ? { egress: egress.socket } : {}),
          env: { ...this.options.baseEnv, ...launch.env },
          stdin: JSON.stringify(call.input ?? null),
          timeoutMs,
          maxOutputBytes: launch.maxOutputBytes,
          limits: {
            ...(limits.cpuSeconds ? { cpuSeconds: limits.cpuSeconds } : {}),
            ...(limits.memoryMb ? { addressSpaceBytes: limits.memoryMb * MIB } : {}),
            ...(limits.openFiles ? { openFiles: limits.openFiles } : {}),
            ...(limits.processes ? { processes: limits.processes } : {}),
          },
          ...(signal ? { signal } : {}),
        },
      ).finally(() => egress?.close());
      return subprocessOutcome(name, result, timeoutMs);
    } catch (err) {
      return { ok: false, error: toWireError(err) };
    }
  }
}
