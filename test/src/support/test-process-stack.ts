import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  eventually,
  useTestNats,
  useTestSchema,
  type TestNats,
  type TestSchema,
} from '@toolgate/testing';
import {
  startProcessStack,
  type ProcessStack,
  type ProcessStackOptions,
  type ServiceName,
} from './process-stack';
import { removeWorkdir, stackEnv, TEST_GRANTS } from './test-stack';

/**
 * Toolgate's services as separate processes (see process-stack.ts) on a stream prefix, a schema
 * and a workdir of the test's own, with {@link TEST_GRANTS}: the process-shaped twin of
 * `startTestStack`.
 */
export interface TestProcessStack {
  readonly processes: ProcessStack;
  readonly nats: TestNats;
  readonly schema: TestSchema;
  readonly workdir: string;
  /** The environment every service was started with (`stackEnv` and the caller's `env`). */
  readonly env: NodeJS.ProcessEnv;
  /** Calls the gateway's HTTP API; `headers` are added to the request's. */
  http(
    method: string,
    route: string,
    token: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }>;
  /** More services on the same configuration, each a process of its own; `stop` stops them too. */
  startMore(services: readonly ServiceName[]): Promise<ProcessStack>;
  /** Stops every process, then removes the streams, the schema and the workdir. */
  stop(): Promise<void>;
}

/**
 * Starts the services as processes for a test labelled `label`. `env` is added to `stackEnv`'s;
 * the other options go to `startProcessStack`.
 */
export async function startTestProcessStack(
  label: string,
  options: Omit<ProcessStackOptions, 'env'> & { env?: NodeJS.ProcessEnv } = {},
): Promise<TestProcessStack> {
  const { env: extra, ...launch } = options;
  const nats = await useTestNats(label);
  const schema = await useTestSchema(label);
  const workdir = await mkdtemp(path.join(tmpdir(), `toolgate-${label}-`));
  const env = { ...stackEnv(nats, schema, workdir, TEST_GRANTS), ...extra };
  const more: ProcessStack[] = [];
  let processes: ProcessStack | undefined;
  const stop = async () => {
    for (const stack of more) await stack.stop();
    await processes?.stop();
    await nats.cleanup();
    await schema.cleanup();
    await removeWorkdir(workdir);
  };
  try {
    processes = await startProcessStack({ ...launch, env });
  } catch (err) {
    await stop();
    throw err;
  }
  const gatewayUrl = processes.gatewayUrl;
  return {
    processes,
    nats,
    schema,
    workdir,
    env,
    async http(method, route, token, body, headers = {}) {
      const res = await fetch(`${gatewayUrl}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    async startMore(services) {
      const stack = await startProcessStack({ ...launch, env, services });
      more.push(stack);
      return stack;
    },
    stop,
  };
}

/**
 * Registers a remote tool (`risk: read`, a 120 s deadline) through the gateway, trying again until
 * it answers 201: right after a start the gateway may not have seen the executor's announcement in
 * the registry's KV mirror yet (`executor-unregistered`).
 */
export async function registerRemoteToolWhenServed(
  stack: Pick<TestProcessStack, 'http'>,
  token: string,
  tool: { name: string; description: string },
): Promise<void> {
  await eventually(
    async () => {
      const registered = await stack.http('POST', '/v1/tools', token, {
        tool: {
          ...tool,
          parameters: { type: 'object' },
          policy: { executor: 'remote', risk: 'read', timeoutMs: 120_000 },
        },
      });
      return registered.status === 201 ? true : undefined;
    },
    { timeoutMs: 20_000, what: `${tool.name} to register` },
  );
}
