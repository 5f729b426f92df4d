import {
  ErrorCode,
  InvalidArgumentsError,
  toWireError,
  type RegisteredTool,
} from '@toolgate/contracts';
import type { Sandbox } from '@toolgate/sandbox';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import type { ToolRunOutcome } from '@toolgate/tools';
import type { CallExecutor, CallRun } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import { fillArgv } from './argv-template';
import { protectedBinds } from './protected-binds';
import { subprocessOutcome } from './subprocess-outcome';
import { callNetwork } from './call-network';

export interface SubprocessExecutorOptions {
  sandbox: Sandbox;
  /**
   * The tool as registered now, if its contract is the one the call was decided on (the registry's
   * `current`). The command is read at run time: it is policy, not part of the decided event.
   */
  lookup(tenant: string, name: string, contractHash: string): Promise<RegisteredTool | undefined>;
  /** The protected paths of the call's policy, bound read-only in its directory. */
  protectedPaths(call: PendingCall): ProtectedPathMatcher;
  /** Whether the call may reach `host` (the domain rules of its tenant and profile). Fails closed. */
  checkDomain(call: PendingCall, host: string): Promise<'allow' | 'deny'> | 'allow' | 'deny';
  /** The environment every tool process starts from: the operator's allowlist applied to the host's. */
  baseEnv: Readonly<Record<string, string>>;
  /** The cap on stdout and on stderr; a tool may lower it. */
  maxOutputBytes: number;
}

const MIB = 1024 * 1024;

/**
 * The `subprocess` executor: one sandboxed process per call, running the tool's registered argv
 * with the call's input as JSON on stdin and taking its result as JSON from stdout (the protocol
 * is {@link subprocessOutcome}'s table). Input arrives validated against the contract; the argv
 * template only ever fills whole arguments. Network only for a tool of risk `network` whose
 * declared hosts all pass the call's domain rules.
 */
export class SubprocessExecutor implements CallExecutor {
  constructor(private readonly options: SubprocessExecutorOptions) {}

  async run(call: PendingCall, { cwd, timeoutMs, signal }: CallRun): Promise<ToolRunOutcome> {
    const name = call.tool.name;
    try {
      let tool: RegisteredTool | undefined;
      try {
        tool = await this.options.lookup(call.tenant, name, call.tool.contractHash);
      } catch {
        return fail(ErrorCode.Unavailable, `the registration of ${name} could not be read`);
      }
      if (!tool) {
        return fail(
          ErrorCode.Conflict,
          `${name} is no longer registered with the contract this call was decided on`,
        );
      }
      const command = tool.policy.command;
      if (!command) return fail(ErrorCode.Config, `${name} has no command to run`);
      const filled = fillArgv(command.argv, call.input);
      if (!filled.ok) {
        return { ok: false, error: new InvalidArgumentsError(name, filled.issues).toWire() };
      }
      const network = await callNetwork(call, command.network?.hosts, this.options.checkDomain);
      if (typeof network === 'object') return network;
      const limits = command.limits ?? {};
      const result = await this.options.sandbox.run({
        argv: filled.argv,
        cwd,
        writable: call.isolation !== 'readonly',
        protectedPaths: await protectedBinds(this.options.protectedPaths(call), cwd),
        network,
        env: {
          ...this.options.baseEnv,
          ...command.env,
          // Last, so a registration cannot shadow them: the dispatch id is the idempotency key.
          TOOLGATE_DISPATCH_ID: call.dispatchId,
          TOOLGATE_RUN_ID: call.runId,
          TOOLGATE_TOOL: name,
          TOOLGATE_DEADLINE_MS: String(timeoutMs),
        },
        stdin: JSON.stringify(call.input ?? null),
        timeoutMs,
        maxOutputBytes: Math.min(
          this.options.maxOutputBytes,
          limits.outputBytes ?? this.options.maxOutputBytes,
        ),
        limits: {
          ...(limits.cpuSeconds ? { cpuSeconds: limits.cpuSeconds } : {}),
          ...(limits.memoryMb ? { addressSpaceBytes: limits.memoryMb * MIB } : {}),
          ...(limits.openFiles ? { openFiles: limits.openFiles } : {}),
          ...(limits.processes ? { processes: limits.processes } : {}),
        },
        ...(signal ? { signal } : {}),
      });
      return subprocessOutcome(name, result, timeoutMs);
    } catch (err) {
      return { ok: false, error: toWireError(err) };
    }
  }
}

function fail(code: ErrorCode, message: string, details?: Record<string, unknown>): ToolRunOutcome {
  return { ok: false, error: details ? { code, message, details } : { code, message } };
}
