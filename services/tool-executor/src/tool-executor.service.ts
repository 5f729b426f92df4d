import { DEFAULT_PROTECTION } from '@toolgate/permissions';
import type { ProtectedPathMatcher } from '@toolgate/worktree-guard';
import { createBuiltinTools, type CheckDomain } from './builtins';
import { buildEnv, parseExecutionPolicy, withRealPaths } from './builtins/execution-policy';
import {
  bootstrapService,
  realLenient,
  stopOnce,
  settlePoisoned,
  startupStep,
  type RunningService,
  type SideConnection,
} from '@toolgate/service-kit';
import { ToolRegistry } from '@toolgate/registry';
import type { PendingCall } from './execution/pending-call';
import { callScope, hostToolScope } from './execution/call-scope';
import { InputCheck } from './execution/input-check';
import { ToolExecutorModule } from './app.module';
import { ToolRunner } from './execution/tool-runner';
import { listenForCancels } from './execution/cancel-listener';
import { McpExecutor } from './mcp/mcp-executor';
import { serveMcpListing } from './mcp/mcp-listing-responder';
import { StdioUpstreams } from './mcp/stdio-upstreams';
import type { ExecutorConfig } from './config';
import type { JournalStreamOptions } from '@toolgate/bus';
import { ConfigError, isStdioUpstream, type ExecutorKind } from '@toolgate/contracts';
import { openContainerBackend } from './container/open-container-backend';
import { ContainerExecutor } from './container/container-executor';
import type { CallExecutor } from './execution/call-executor';
import type { CommandToolOptions } from './subprocess/command-call';
import { openExecutorSandbox } from './subprocess/open-sandbox';
import { FileScopePool } from './builtins/file-scope/file-scope-pool';
import { SubprocessExecutor } from './subprocess/subprocess-executor';
import { ScriptEngine } from '@toolgate/script-tools';
import { loadScriptDirectory } from './scripts/script-directory';
import type { DecideHostCall } from './scripts/script-host';
import { ScriptExecutor } from './scripts/script-executor';

export interface ToolExecutorOptions {
  config: ExecutorConfig;
  /**
   * Whether http_fetch may connect to `host` for this call: the domain rules of the call's tenant
   * and profile. Fails closed: a throw is a deny.
   */
  checkDomain(call: PendingCall, host: string): Promise<'allow' | 'deny'> | 'allow' | 'deny';
  /**
   * The protected paths of the call's tenant and profile (`chain.protectedPaths`). Default: the
   * built-in and default ones. Must not throw; fall back to the defaults.
   */
  protectedPaths?(call: PendingCall): ProtectedPathMatcher;
  /**
   * The permission chain's decision on a script's host call (the call's tenant and profile, the
   * builtin the host function runs through, its input). Absent: scripts' host calls are refused.
   */
  decideHostCall?: DecideHostCall;
  /** The connections the decisions above read through, checked by /readyz (see `bootstrapService`). */
  sideConnections?: readonly SideConnection[];
  streams?: JournalStreamOptions;
  logger?: false;
}

/** Starts the tool-executor: builtins, remote executor, and its consumers on `decided` and `resolved`. */
export async function startToolExecutor(
  options: ToolExecutorOptions,
): Promise<RunningService & { abandon(): Promise<void> }> {
  const { config } = options;
  const checkDomain: CheckDomain = async (host) => {
    const call = callScope.getStore();
    if (!call) return 'deny';
    // A script's host call: the builtin's rules and the script's, both.
    const hostTool = hostToolScope.getStore();
    if (hostTool && (await options.checkDomain({ ...call, tool: hostTool }, host)) !== 'allow')
      return 'deny';
    return options.checkDomain(call, host);
  };
  // First: a host that cannot sandbox refuses to start here, before anything connects.
  const sandbox = await openExecutorSandbox(config.sandbox);
  // Stdio MCP servers run only in the sandbox: without it they are a configuration error.
  const stdioUpstreams = config.mcpUpstreams.filter(isStdioUpstream);
  if (stdioUpstreams.length && !sandbox) {
    throw new ConfigError(
      'TOOLGATE_MCP_UPSTREAMS names stdio MCP servers, which run only in the sandbox: turn EXECUTOR_SANDBOX on or remove them',
      { details: { field: 'TOOLGATE_MCP_UPSTREAMS' } },
    );
  }
  // The file builtins' helpers: a host where they cannot start refuses here too.
  const files = sandbox
    ? await FileScopePool.open(sandbox, { maxHelpers: config.inprocessConcurrency })
    : null;
  const containers = await openContainerBackend(config.container);
  // Parsed once: defaults (the SAFE_ENV_VARS allowlist, scopes of [cwd]) live in the policy
  // schema, and a bad value is a ConfigError naming it.
  const policy = withRealPaths(
    parseExecutionPolicy({
      cwd: config.cwd,
      ...(config.readPaths ? { readPaths: config.readPaths } : {}),
      ...(config.writePaths ? { writePaths: config.writePaths } : {}),
      ...(config.envAllowlist ? { env: { names: config.envAllowlist } } : {}),
      http: { internal: [...config.fetchInternal], servicePorts: [...config.servicePorts] },
    }),
    realLenient,
  );
  const builtins = createBuiltinTools({
    policy,
    checkDomain,
    protectedPaths: () => {
      const call = callScope.getStore();
      if (!call || !options.protectedPaths) return DEFAULT_PROTECTION;
      return options.protectedPaths(call);
    },
    sandbox,
    files,
  });
  // Every input is checked against its registered contract before an executor sees it; the
  // registry opens on the service's connection below, and a call that comes first waits for it.
  let registryOpened!: (registry: ToolRegistry) => void;
  let registryFailed!: (err: unknown) => void;
  const registryReady = new Promise<ToolRegistry>((resolve, reject) => {
    registryOpened = resolve;
    registryFailed = reject;
  });
  registryReady.catch(() => undefined);
  const inputCheck = new InputCheck(() => registryReady);
  const engine = await ScriptEngine.load();
  // A script worker warm before the first call (a fresh one costs tens of ms); a failure here is
  // the first call's to report.
  if (config.scripts.warmWorkers > 0)
    engine.warm(config.scripts.warmWorkers).catch(() => undefined);
  const scripts = new ScriptExecutor({
    engine,
    registry: () => registryReady,
    builtins: new Map(builtins.map((b) => [b.contract.name, b])),
    ...(options.decideHostCall ? { decideHostCall: options.decideHostCall } : {}),
    limits: { memoryBytes: config.scripts.memoryMb * 1024 * 1024, cpuMs: config.scripts.cpuMs },
  });
  const commandTools: CommandToolOptions = {
    lookup: async (tenant, name, hash) => (await registryReady).current(tenant, name, hash),
    checkDomain: (call, host) => options.checkDomain(call, host),
    protectedPaths: (call) => options.protectedPaths?.(call) ?? DEFAULT_PROTECTION,
    maxOutputBytes: policy.maxOutputBytes,
    // The same entries and ports as http_fetch's (one allowance, cached per parsed policy).
    internal: policy.http.internal,
    servicePorts: policy.http.servicePorts,
  };
  // Scripts need no OS sandbox of their own (QuickJS is theirs); the shell they may call has one.
  const executors: Partial<Record<ExecutorKind, CallExecutor>> = { script: scripts };
  if (sandbox) {
    executors.subprocess = new SubprocessExecutor({
      ...commandTools,
      sandbox,
      baseEnv: buildEnv(policy, process.env),
    });
  }
  if (containers) {
    executors.container = new ContainerExecutor({ ...commandTools, backend: containers, sandbox });
  }
  const stdio = stdioUpstreams.length && sandbox ? new StdioUpstreams(sandbox) : null;
  // Served only where upstreams are configured: an `mcp` tool is refused at registration otherwise.
  const mcp = config.mcpUpstreams.length
    ? new McpExecutor(config.mcpUpstreams, commandTools.lookup, stdio)
    : undefined;
  if (mcp) executors.mcp = mcp;
  const service = await bootstrapService({
    name: 'tool-executor',
    nats: config,
    metrics: config.metrics,
    prefix: config.prefix,
    port: config.port,
    host: config.host,
    requiredStreams: (s) => [`KV_${s.toolsBucket}`],
    ...(options.sideConnections ? { sideConnections: options.sideConnections } : {}),
    ...(options.streams ? { streams: options.streams } : {}),
    ...(options.logger === false ? { logger: false } : {}),
    module: (nc, subjects) =>
      ToolExecutorModule.forRoot(nc, subjects, config, builtins, executors, inputCheck),
    transport: {
      role: 'executor',
      handlers: {
        decided: {
          concurrency: config.concurrency,
          ackWaitMs: config.ackWaitMs,
          maxDeliver: config.maxDeliver,
          maxAckPending: config.maxAckPending,
        },
        resolved: {
          concurrency: config.concurrency,
          ackWaitMs: config.ackWaitMs,
          maxDeliver: config.maxDeliver,
          maxAckPending: config.maxAckPending,
        },
      },
      onPoison: settlePoisoned,
    },
  }).catch(async (err: unknown) => {
    await files?.close();
    throw err;
  });
  let opened: ToolRegistry | undefined;
  try {
    opened = await startupStep('opening the tool registry', () =>
      ToolRegistry.open(service.nc, service.subjects, { replicas: config.streamReplicas }),
    );
    registryOpened(opened);
    const announcing = opened;
    await startupStep('announcing the builtin tools', () =>
      announcing.announce(
        builtins.map((b) => ({ ...b.contract, policy: b.policy })),
        ['inprocess', 'remote', ...(Object.keys(executors) as ExecutorKind[])],
      ),
    );
    const scriptsDir = config.scripts.dir;
    if (scriptsDir) {
      // Loaded once at start-up: restart the executor to pick up changed files.
      const directory = await loadScriptDirectory(scriptsDir, {
        engine,
        isBuiltin: (name) => builtins.some((b) => b.contract.name === name),
      }).catch((err: unknown) => {
        throw new ConfigError(
          `EXECUTOR_SCRIPTS_DIR ${scriptsDir} cannot be read: ${(err as Error).message}`,
          { details: { field: 'EXECUTOR_SCRIPTS_DIR' } },
        );
      });
      await startupStep('announcing the scripts directory', () =>
        announcing.announceScripts(
          directory.loaded.map((loaded) => loaded.record),
          { path: scriptsDir, loadedAt: new Date().toISOString(), skipped: directory.skipped },
        ),
      );
    }
  } catch (err) {
    // A start-up failing part-way closes what it opened, so a retried start-up begins clean.
    registryFailed(err);
    opened?.stop();
    await service.stop();
    await files?.close();
    throw err;
  }
  const registry = opened;
  const cancels = listenForCancels(
    service.nc,
    service.subjects,
    service.keys,
    service.app.get(ToolRunner),
  );
  const listing = stdio
    ? serveMcpListing(service.nc, service.subjects, service.keys, stdioUpstreams, stdio)
    : undefined;
  const stop = service.stop;
  return {
    ...service,
    // A stop past its drain cap: the calls still running are killed, then handed back unsettled.
    abandon: () => service.app.get(ToolRunner).abandon(),
    stop: stopOnce(async () => {
      cancels.unsubscribe();
      await listing?.stop();
      registry.stop();
      // Calls in flight finish; deliveries waiting on another replica's claim hand it back.
      service.app.get(ToolRunner).close();
      await stop();
      // After the calls drained: no file helper outlives the executor.
      await files?.close();
      // After the consumers drained: the last containers' clean-up.
      await containers?.idle();
      await mcp?.close();
      // Last: the directory of the calls' egress sockets (runc's calls use it too).
      await sandbox?.close();
    }),
  };
}
