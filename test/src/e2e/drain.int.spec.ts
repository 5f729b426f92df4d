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
import { startProcessStack, type ProcessStack } from '../support/process-stack';
import { TEST_GRANTS, TOKENS, removeWorkdir, stackEnv } from '../support/test-stack';

/**
 * A graceful stop says what it waits for and gives up at TOOLGATE_DRAIN_TIMEOUT_MS: the issue's
 * case, a remote call in flight whose worker never answers (it used to wait out the call's whole
 * deadline, silently).
 */
describe('a stop with a call in flight whose worker is gone (services as processes)', () => {
  let nats: TestNats;
  let schema: TestSchema;
  let workdir: string;
  let stack: ProcessStack;

  beforeAll(async () => {
    nats = await useTestNats('drain');
    schema = await useTestSchema('drain');
    workdir = await mkdtemp(path.join(tmpdir(), 'toolgate-drain-'));
    stack = await startProcessStack({
      env: stackEnv(nats, schema, workdir, TEST_GRANTS),
      envFor: { 'tool-executor': { TOOLGATE_DRAIN_TIMEOUT_MS: '1500' } },
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await nats?.cleanup();
    await schema?.cleanup();
    await removeWorkdir(workdir);
  });

  const api = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${stack.gatewayUrl}${route}`, {
      method,
      headers: { authorization: `Bearer ${TOKENS.acmeAdmin}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('names the call it waits for, then exits at the drain cap instead of the call deadline', async () => {
    // A worker that takes every request and never answers: the call waits for its deadline.
    const { subject, queue } = nats.subjects.remoteTool('acme', 'hangs');
    const received: string[] = [];
    const worker = nats.nc.subscribe(subject, {
      queue,
      callback: (_err, msg) => void received.push(msg.subject),
    });
    try {
      // The gateway learns which executors are served from the registry's KV mirror: right after
      // a start it may not have seen the executor's announcement yet (executor-unregistered).
      await eventually(
        async () => {
          const registered = await api('POST', '/v1/tools', {
            tool: {
              name: 'hangs',
              description: 'Never answers.',
              parameters: { type: 'object' },
              policy: { executor: 'remote', risk: 'read', timeoutMs: 120_000 },
            },
          });
          return registered.status === 201 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'the tool to register' },
      );
      const submitted = await api('POST', '/v1/dispatches', {
        runId: 'run-drain',
        callId: 'c1',
        agent: { agentType: 'coder' },
        tool: 'hangs',
        input: {},
      });
      expect(submitted.status).toBe(202);
      const dispatchId = submitted.body.dispatchId as string;
      await eventually(async () => (received.length > 0 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the worker to receive the call',
      });

      const executor = stack.service('tool-executor');
      const exit = await executor.stop(60_000);
      // Gave up at the cap (exit 1: work was abandoned), not killed by the launcher's SIGKILL.
      expect(exit).toEqual({ code: 1, signal: null });
      const output = executor.output();
      expect(output).toMatch(
        new RegExp(
          `draining \\(at most 1.5 s\\): 1 in flight: decided of ${dispatchId} \\(run run-drain, tenant acme\\)`,
        ),
      );
      expect(output).toMatch(/drain cap of 1.5 s reached with 1 in flight: decided of/);
      expect(output).toMatch(/redelivered to another replica/);
    } finally {
      worker.unsubscribe();
    }
  }, 120_000);
});
