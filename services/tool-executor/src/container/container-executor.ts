import { ErrorCode, toWireError } from '@toolgate/contracts';
import type { ContainerBackend, ContainerResult } from '@toolgate/container';
import type { ToolRunOutcome } from '@toolgate/tools';
import { failedOutcome, type CallExecutor, type CallRun } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import {
  callEgress,
  commandLaunch,
  decidedTool,
  type CommandToolOptions,
} from '../subprocess/command-call';
import type { Sandbox } from '@toolgate/sandbox';
import { holdProtectedPaths, protectedState } from '../subprocess/protected-binds';
import { subprocessOutcome } from '../subprocess/subprocess-outcome';

export interface ContainerExecutorOptions extends CommandToolOptions {
  backend: ContainerBackend;
  /**
   * The executor's sandbox, in which protected paths a container created or replaced in the
   * call's directory are put back (see `holdProtectedPaths`). Without one they are reported, not
   * restored.
   */
  sandbox?: Sandbox | null;
}

const MIB = 1024 * 1024;

/**
 * The `container` executor: one container per call from the tool's image, running its
 * registered argv with the call's input as JSON on stdin (and in /toolgate/input.json) and its
 * result as JSON from stdout — the subprocess protocol, whose exit table it shares — on the
 * configured backend (runc here, a Job in Kubernetes). Network only for a tool of risk `network`
 * whose declared hosts all pass the call's domain rules. The environment is the image's, the
 * tool's fixed `env` and Toolgate's variables: nothing of the service's own. Under runc the
 * policy's protected paths in the call directory hold on the effect — bound read-only with every
 * folder on the way to one, and one the container creates or a protected symlink it replaces put
 * back after it (the call is then denied); a Job's /work is an empty volume, so it has none.
 */
export class ContainerExecutor implements CallExecutor {
  constructor(private readonly options: ContainerExecutorOptions) {}

  async run(call: PendingCall, { cwd, timeoutMs, signal }: CallRun): Promise<ToolRunOutcome> {
    const name = call.tool.name;
    try {
      const decided = await decidedTool(call, this.options.lookup);
      if (!decided.ok) return decided;
      const { command, container } = decided.tool.policy;
      if (!command || !container) {
        return failedOutcome(ErrorCode.Config, `${name} has no image or command to run`);
      }
      const launch = await commandLaunch(call, command, this.options, timeoutMs);
      if (!launch.ok) return launch;
      const { limits } = launch;
      const runc = this.options.backend.kind === 'runc';
      const writable = call.isolation !== 'readonly';
      const matcher = this.options.protectedPaths(call);
      const before = runc ? await protectedState(matcher, cwd) : undefined;
      // runc: the container's own namespace, through the call's proxy; a Job: the pod's network,
      // which the namespace's NetworkPolicies bound (deploy/k8s/tool-jobs.yaml).
      const egress =
        runc && launch.network ? await callEgress(call, command, this.options) : undefined;
      const result = await this.options.backend
        .run({
          image: container.image,
          argv: launch.argv,
          env: launch.env,
          cwd,
          writable,
          protectedPaths: before?.paths ?? [],
          network: launch.network && !egress,
          ...(egress ? { egress: egress.socket } : {}),
          input: JSON.stringify(call.input ?? null),
          timeoutMs,
          maxOutputBytes: launch.maxOutputBytes,
          limits: {
            ...(limits.memoryMb ? { memoryBytes: limits.memoryMb * MIB } : {}),
            ...(limits.processes ? { processes: limits.processes } : {}),
            ...(limits.cpuSeconds ? { cpuSeconds: limits.cpuSeconds } : {}),
            ...(limits.openFiles ? { openFiles: limits.openFiles } : {}),
            ...(container.cpus ? { cpus: container.cpus } : {}),
          },
          labels: { tool: name, dispatchId: call.dispatchId },
          ...(signal ? { signal } : {}),
        })
        .finally(() => egress?.close());
      if (before && writable) {
        await holdProtectedPaths(this.options.sandbox ?? null, matcher, cwd, before, result);
      }
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
function containerOutcome(
  toolName: string,
  result: ContainerResult,
  timeoutMs: number,
): ToolRunOutcome {
  if (result.ending === 'exited' && result.startError) {
    return failedOutcome(
      ErrorCode.Config,
      `${toolName}: the command could not be started in its container: ${result.startError}`,
    );
  }
  if (result.ending === 'exited' && result.memoryExceeded) {
    return failedOutcome(
      ErrorCode.ToolFailed,
      `${toolName} exceeded its memory limit and was killed`,
      {
        stderrTail: result.stderr.tail(2048),
      },
    );
  }
  return subprocessOutcome(toolName, result, timeoutMs);
}
