import {
  ErrorCode,
  InvalidArgumentsError,
  toWireError,
  type RegisteredTool,
} from '@toolgate/contracts';
import type { ContainerBackend, ContainerResult } from '@toolgate/container';
import type { ToolRunOutcome } from '@toolgate/tools';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import type { CallExecutor, CallRun } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import { fillArgv } from '../subprocess/argv-template';
import { protectedBinds } from '../subprocess/protected-binds';
import { subprocessOutcome } from '../subprocess/subprocess-outcome';
import { callNetwork } from '../subprocess/call-network';

export interface ContainerExecutorOptions {
  backend: ContainerBackend;
  /** The tool as registered now, if its contract is the one the call was decided on. */
  lookup(tenant: string, name: string, contractHash: string): Promise<RegisteredTool | undefined>;
  /** The protected paths of the call's policy, bound read-only in its directory (runc). */
  protectedPaths(call: PendingCall): ProtectedPathMatcher;
  /** Whether the call may reach `host` (the domain rules of its tenant and profile). Fails closed. */
  checkDomain(call: PendingCall, host: string): Promise<'allow' | 'deny'> | 'allow' | 'deny';
  /** The cap on stdout and on stderr; a tool may lower it. */
  maxOutputBytes: number;
}

const MIB = 1024 * 1024;

/**
 * The `container` executor: one container per call from the tool's image, running its
 * registered argv with the call's input as JSON on stdin (and in /toolgate/input.json) and its
 * result as JSON from stdout — the subprocess protocol, whose exit table it shares — on the
 * configured backend (runc here, a Job in Kubernetes). Network only for a tool of risk `network`
 * whose declared hosts all pass the call's domain rules. The environment is the image's, the
 * tool's fixed `env` and Toolgate's variables: nothing of the service's own.
 */
export class ContainerExecutor implements CallExecutor {
  constructor(private readonly options: ContainerExecutorOptions) {}

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
      const { command, container } = tool.policy;
      if (!command || !container) {
        return fail(ErrorCode.Config, `${name} has no image or command to run`);
      }
      const filled = fillArgv(command.argv, call.input);
      if (!filled.ok) {
        return { ok: false, error: new InvalidArgumentsError(name, filled.issues).toWire() };
      }
      const network = await callNetwork(call, command.network?.hosts, this.options.checkDomain);
      if (typeof network === 'object') return network;
      const limits = command.limits ?? {};
      const result = await this.options.backend.run({
        image: container.image,
        argv: filled.argv,
        env: {
          ...command.env,
          // Last, so a registration cannot shadow them: the dispatch id is the idempotency key.
          TOOLGATE_DISPATCH_ID: call.dispatchId,
          TOOLGATE_RUN_ID: call.runId,
          TOOLGATE_TOOL: name,
          TOOLGATE_DEADLINE_MS: String(timeoutMs),
        },
        cwd,
        writable: call.isolation !== 'readonly',
        protectedPaths:
          this.options.backend.kind === 'runc'
            ? await protectedBinds(this.options.protectedPaths(call), cwd)
            : [],
        network,
        input: JSON.stringify(call.input ?? null),
        timeoutMs,
        maxOutputBytes: Math.min(
          this.options.maxOutputBytes,
          limits.outputBytes ?? this.options.maxOutputBytes,
        ),
        limits: {
          ...(limits.memoryMb ? { memoryBytes: limits.memoryMb * MIB } : {}),
          ...(limits.processes ? { processes: limits.processes } : {}),
          ...(limits.cpuSeconds ? { cpuSeconds: limits.cpuSeconds } : {}),
          ...(limits.openFiles ? { openFiles: limits.openFiles } : {}),
          ...(container.cpus ? { cpus: container.cpus } : {}),
        },
        labels: { tool: name, dispatchId: call.dispatchId },
        ...(signal ? { signal } : {}),
      });
      return containerOutcome(name, result, timeoutMs);
    } catch (err) {
      return { ok: false, error: toWireError(err) };
    }
  }
}

/**
 * What a finished container means: the subprocess exit table, after the two endings only a
 * container has — the runtime could not start the command (`config`, with the runtime's reason),
 * and the kernel killed it at its memory limit (`tool-failed`, saying so). Pure.
 */
export function containerOutcome(
  toolName: string,
  result: ContainerResult,
  timeoutMs: number,
): ToolRunOutcome {
  if (result.ending === 'exited' && result.startError) {
    return fail(
      ErrorCode.Config,
      `${toolName}: the command could not be started in its container: ${result.startError}`,
    );
  }
  if (result.ending === 'exited' && result.memoryExceeded) {
    return fail(ErrorCode.ToolFailed, `${toolName} exceeded its memory limit and was killed`, {
      stderrTail: result.stderr.tail(2048),
    });
  }
  return subprocessOutcome(toolName, result, timeoutMs);
}

function fail(code: ErrorCode, message: string, details?: Record<string, unknown>): ToolRunOutcome {
  return { ok: false, error: details ? { code, message, details } : { code, message } };
}
