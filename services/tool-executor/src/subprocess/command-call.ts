import {
  ErrorCode,
  InvalidArgumentsError,
  type RegisteredTool,
  type SubprocessCommand,
} from '@toolgate/contracts';
import type { Sandbox } from '@toolgate/sandbox';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import { failedOutcome, type FailedOutcome } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';
import { fillArgv } from './argv-template';
import { internalAllowance } from '../builtins/connect-guard';
import { callNetwork, type CheckCallDomain } from './call-network';
import { EgressProxy } from './egress-proxy';

/** What the `subprocess` and `container` executors read a registered command tool's calls with. */
export interface CommandToolOptions {
  /**
   * The tool as registered now, if its contract is the one the call was decided on (the registry's
   * `current`). The command is read at run time: it is policy, not part of the decided event.
   */
  lookup(tenant: string, name: string, contractHash: string): Promise<RegisteredTool | undefined>;
  /** The protected paths of the call's policy, bound read-only in its directory. */
  protectedPaths(call: PendingCall): ProtectedPathMatcher;
  /** Whether the call may reach `host` (the domain rules of its tenant and profile). Fails closed. */
  checkDomain: CheckCallDomain;
  /** The cap on stdout and on stderr; a tool may lower it. */
  maxOutputBytes: number;
  /**
   * The internal addresses a networked tool may reach through its egress proxy
   * (`EXECUTOR_FETCH_INTERNAL`, as for `http_fetch`): addresses or `<address>/<prefix>` blocks.
   * Default none.
   */
  internal?: readonly string[];
  /** The ports an internal entry without a port leaves closed (`SERVICE_PORTS` when absent). */
  servicePorts?: readonly number[];
}

/**
 * The registration a call was decided on: `unavailable` when the registry cannot be read,
 * `conflict` when the tool was re-registered (or removed) since the decision.
 */
export async function decidedTool(
  call: PendingCall,
  lookup: CommandToolOptions['lookup'],
): Promise<{ ok: true; tool: RegisteredTool } | FailedOutcome> {
  const name = call.tool.name;
  let tool: RegisteredTool | undefined;
  try {
    tool = await lookup(call.tenant, name, call.tool.contractHash);
  } catch {
    return failedOutcome(ErrorCode.Unavailable, `the registration of ${name} could not be read`);
  }
  if (!tool) {
    return failedOutcome(
      ErrorCode.Conflict,
      `${name} is no longer registered with the contract this call was decided on`,
    );
  }
  return { ok: true, tool };
}

/** How to start one call's command, whatever runs it. */
export interface CommandLaunch {
  argv: string[];
  /** Whether the call gets the network ({@link callNetwork}). */
  network: boolean;
  /** The tool's fixed `env` and Toolgate's variables, on top of whatever base the runner gives. */
  env: Record<string, string>;
  maxOutputBytes: number;
  limits: NonNullable<SubprocessCommand['limits']>;
}

/**
 * The launch of a call's command: its argv filled from the input (`invalid-arguments` when the
 * input cannot fill it), its network (`denied` when the domain rules refuse a declared host), its
 * environment and output cap. Settles before anything runs when it fails.
 */
export async function commandLaunch(
  call: PendingCall,
  command: SubprocessCommand,
  options: Pick<CommandToolOptions, 'checkDomain' | 'maxOutputBytes'>,
  timeoutMs: number,
): Promise<({ ok: true } & CommandLaunch) | FailedOutcome> {
  const name = call.tool.name;
  const filled = fillArgv(command.argv, call.input);
  if (!filled.ok) {
    return { ok: false, error: new InvalidArgumentsError(name, filled.issues).toWire() };
  }
  const network = await callNetwork(call, command.network?.hosts, options.checkDomain);
  if (typeof network === 'object') return network;
  const limits = command.limits ?? {};
  return {
    ok: true,
    argv: filled.argv,
    network,
    env: {
      ...command.env,
      // Last, so a registration cannot shadow them: the dispatch id is the idempotency key.
      TOOLGATE_DISPATCH_ID: call.dispatchId,
      TOOLGATE_RUN_ID: call.runId,
      TOOLGATE_TOOL: name,
      TOOLGATE_DEADLINE_MS: String(timeoutMs),
    },
    maxOutputBytes: Math.min(options.maxOutputBytes, limits.outputBytes ?? options.maxOutputBytes),
    limits,
  };
}

/**
 * The egress proxy of a call given the network ({@link EgressProxy}): its declared hosts, its
 * domain rules and the operator's internal addresses. The caller closes it once the call ends.
 */
export function callEgress(
  call: PendingCall,
  command: SubprocessCommand,
  /** With the executor's sandbox, whose `egressRoot` no sandboxed run can see (none: the OS's tmp). */
  options: Pick<CommandToolOptions, 'checkDomain' | 'internal' | 'servicePorts'> & {
    sandbox?: Sandbox | null;
  },
): Promise<EgressProxy> {
  return EgressProxy.open(
    {
      hosts: command.network?.hosts ?? [],
      checkDomain: (host) => options.checkDomain(call, host),
      internal: internalAllowance(options.internal ?? [], options.servicePorts),
      who: call.tool.name,
    },
    options.sandbox?.egressRoot,
  );
}
