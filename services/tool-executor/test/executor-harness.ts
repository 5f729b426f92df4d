import { mkdtempSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { JournalPublisher } from '@toolgate/bus';
import {
  inputDigest,
  journalEvent,
  type DecidedEvent,
  type RegisteredTool,
  type RequestedEvent,
  type Risk,
  type ToolRef,
} from '@toolgate/contracts';
import { ToolRegistry } from '@toolgate/registry';
import { eventually, makeBusyboxImage, NATS_URL, type TestNats } from '@toolgate/testing';
import { loadExecutorConfig } from '../src/config';
import { startToolExecutor } from '../src/tool-executor.service';

export const TENANT = 'acme';

const registries = new WeakMap<TestNats, Promise<ToolRegistry>>();

/**
 * Registers a remote tool for the tenant (taking any input object), as a team would through the
 * gateway, and returns its reference as the gateway records it in a dispatch. Needs a running
 * replica: registering checks that an executor serves `remote`.
 */
export async function registerRemoteTool(
  t: TestNats,
  name: string,
  timeoutMs?: number,
): Promise<ToolRef> {
  let registry = registries.get(t);
  if (!registry) {
    registry = ToolRegistry.open(t.nc, t.subjects);
    registries.set(t, registry);
  }
  const view = await (
    await registry
  ).register(TENANT, {
    name,
    description: `${name}, a test tool`,
    parameters: { type: 'object' },
    policy: { executor: 'remote', risk: 'read', needsApproval: false },
  });
  return {
    name,
    contractHash: view.contractHash,
    needsApproval: false,
    executor: 'remote',
    risk: 'read',
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  };
}

/**
 * Registers a command tool (subprocess or container) for the tenant once a replica has announced
 * that it serves the tool's executor, and returns its reference as the gateway records it in a
 * dispatch.
 */
export async function registerCommandTool(
  registry: ToolRegistry,
  tool: RegisteredTool & { policy: { executor: 'subprocess' | 'container'; risk: Risk } },
  timeoutMs?: number,
): Promise<ToolRef> {
  const view = await eventually(() => registry.register(TENANT, tool).catch(() => undefined), {
    timeoutMs: 10_000,
    what: `${tool.name} to register`,
  });
  return {
    name: tool.name,
    contractHash: view.contractHash,
    needsApproval: false,
    executor: tool.policy.executor,
    risk: tool.policy.risk,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  };
}

/** A call directory (real), a busybox image and runc's state, for specs of command tools. */
export interface CommandDirs {
  work: string;
  images: string;
  runcState: string;
  /** The settings of a replica that runs container tools from these. */
  runcEnv: Record<string, string>;
  remove(): Promise<void>;
}

/** Makes {@link CommandDirs} under the temp directory, named after `label`. */
export async function commandDirs(label: string): Promise<CommandDirs> {
  const work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), `tg-${label}-`)));
  const images = await fs.mkdtemp(path.join(os.tmpdir(), `tg-${label}-images-`));
  const runcState = await fs.mkdtemp(path.join(os.tmpdir(), `tg-${label}-runc-`));
  await makeBusyboxImage(images, 'tools/busybox:1');
  return {
    work,
    images,
    runcState,
    runcEnv: {
      EXECUTOR_CONTAINER: 'runc',
      EXECUTOR_CONTAINER_IMAGES: images,
      EXECUTOR_CONTAINER_STATE_DIR: runcState,
    },
    remove: async () => {
      for (const dir of [work, images, runcState])
        await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/** Stops the registry mirror {@link registerRemoteTool} opened on `t`, if any. */
export async function closeRegistry(t: TestNats): Promise<void> {
  (await registries.get(t))?.stop();
}

/** One replica of the tool-executor on the test's prefix, with its own NATS connection. */
export type Replica = Awaited<ReturnType<typeof startToolExecutor>>;

let cwdOfFile: string | undefined;

/**
 * A directory of the test file's own: not the one jest runs from (Toolgate's checkout), nor the
 * temp directory itself (a checkout may lie in it): no tool scope may overlap the installation.
 */
function defaultCwd(): string {
  cwdOfFile ??= mkdtempSync(path.join(os.tmpdir(), 'tg-executor-cwd-'));
  return cwdOfFile;
}

/** Starts a tool-executor replica; `env` overrides the test's defaults (1 s ack wait). */
export function startReplica(
  t: TestNats,
  env: Record<string, string> = {},
  cwd = defaultCwd(),
): Promise<Replica> {
  const config = loadExecutorConfig({
    NATS_URL,
    TOOLGATE_PREFIX: t.prefix,
    EXECUTOR_PORT: '0',
    EXECUTOR_CWD: cwd,
    EXECUTOR_ACK_WAIT_MS: '1000',
    EXECUTOR_DEFAULT_TIMEOUT_MS: '20000',
    ...env,
  });
  return startToolExecutor({
    config,
    checkDomain: () => 'deny',
    logger: false,
  });
}

/** Kills a replica as a crash would: its connection goes, nothing is acked, settled or drained. */
export async function crash(replica: Replica): Promise<void> {
  await replica.nc.close();
  await replica.app.close().catch(() => undefined);
}

/** The `requested` the gateway records for a call. */
export function requested(
  runId: string,
  dispatchId: string,
  tool: ToolRef,
  input: unknown,
): RequestedEvent {
  return journalEvent({
    type: 'requested',
    id: `${dispatchId}:requested`,
    tenant: TENANT,
    runId,
    dispatchId,
    at: new Date().toISOString(),
    causationId: null,
    callId: dispatchId,
    tool,
    input,
    agent: { agentType: 'tester' },
    isolation: 'none',
    submittedBy: 'tester',
  });
}

/** The `decided` (allow) the evaluator records for a requested call; `overrides` forge it. */
export function decided(
  req: RequestedEvent,
  overrides: Partial<Omit<DecidedEvent, 'type'>> = {},
): DecidedEvent {
  return journalEvent({
    type: 'decided',
    id: `${req.dispatchId}:decided`,
    tenant: req.tenant,
    runId: req.runId,
    dispatchId: req.dispatchId,
    at: new Date().toISOString(),
    causationId: req.id,
    verdict: 'allow',
    decidedBy: 'default',
    policyRevision: 0,
    inputDigest: inputDigest(req.input),
    input: req.input,
    tool: req.tool,
    agent: req.agent,
    isolation: req.isolation,
    ...overrides,
  } as Parameters<typeof journalEvent<'decided'>>[0]);
}

/** Records a call as the gateway and the evaluator would: `requested`, then an allow `decided`. */
export async function dispatch(
  publisher: JournalPublisher,
  runId: string,
  dispatchId: string,
  tool: ToolRef,
  input: unknown,
): Promise<void> {
  const req = requested(runId, dispatchId, tool, input);
  await publisher.append(req);
  await publisher.append(decided(req));
}

/** A remote tool worker that counts what it runs and whether a call ran after its settlement. */
export interface CountingWorker {
  /** Executions per dispatch id. */
  executions: Map<string, number>;
  /** Dispatch ids whose execution began when the dispatch was already settled. */
  afterSettlement: string[];
  /** Total executions. */
  total(): number;
  stop(): void;
}

/**
 * Serves `toolName` for the tenant on `t`'s connection. Each request runs `answer` (its reply, or
 * undefined to never answer, as a hung worker), after checking in the journal whether the call's
 * dispatch was settled before it began — an execution after settlement.
 */
export function serveCountingTool(
  t: TestNats,
  publisher: JournalPublisher,
  toolName: string,
  answer: (input: unknown, execution: number) => Promise<unknown> | unknown,
): CountingWorker {
  const executions = new Map<string, number>();
  const afterSettlement: string[] = [];
  const { subject, queue } = t.subjects.remoteTool(TENANT, toolName);
  const sub = t.nc.subscribe(subject, {
    queue,
    callback: (err, msg) => {
      if (err) return;
      const request = JSON.parse(new TextDecoder().decode(msg.data)) as {
        dispatchId: string;
        runId: string;
        input: unknown;
      };
      const n = (executions.get(request.dispatchId) ?? 0) + 1;
      executions.set(request.dispatchId, n);
      void (async () => {
        const settled = await publisher.last(TENANT, request.runId, request.dispatchId, 'settled');
        if (settled) afterSettlement.push(request.dispatchId);
        const reply = await answer(request.input, n);
        if (reply !== undefined) msg.respond(JSON.stringify(reply));
      })();
    },
  });
  return {
    executions,
    afterSettlement,
    total: () => [...executions.values()].reduce((a, b) => a + b, 0),
    stop: () => sub.unsubscribe(),
  };
}

/** How many journal messages of each type a dispatch has. */
export async function journalCounts(
  t: TestNats,
  runId: string,
  dispatchId: string,
): Promise<Record<string, number>> {
  const info = await t.jsm.streams.info(t.subjects.journal.stream, {
    subjects_filter: t.subjects.journal.forKey(TENANT, runId, dispatchId),
  });
  return Object.fromEntries(
    Object.entries(info.state.subjects ?? {}).map(([s, n]) => [s.split('.').pop()!, n]),
  );
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
