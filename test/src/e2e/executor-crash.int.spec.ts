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
 * An executor killed (SIGKILL) in the middle of a call, with the services' own settings (the ack
 * wait is the executor's default): the call goes to another executor within seconds — one ack
 * wait, renewed by heartbeats while the call ran — and settles once. (The old default ack wait,
 * 30 s, and the manifest's 90 s stranded it that long.)
 */
describe('an executor killed mid-call (services as processes)', () => {
  let nats: TestNats;
  let schema: TestSchema;
  let workdir: string;
  let stack: ProcessStack;
  let standby: ProcessStack | undefined;

  beforeAll(async () => {
    nats = await useTestNats('crash');
    schema = await useTestSchema('crash');
    workdir = await mkdtemp(path.join(tmpdir(), 'toolgate-crash-'));
    stack = await startProcessStack({
      env: stackEnv(nats, schema, workdir, TEST_GRANTS),
      services: ['journal', 'permission-evaluator', 'tool-executor', 'gateway'],
    });
  }, 120_000);

  afterAll(async () => {
    await standby?.stop();
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
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it('settles the call on another executor within seconds, once', async () => {
    // The worker holds the first request (its executor dies with it) and answers the others.
    const { subject, queue } = nats.subjects.remoteTool('acme', 'slow_lookup');
    const received: number[] = [];
    const worker = nats.nc.subscribe(subject, {
      queue,
      callback: (_err, msg) => {
        received.push(Date.now());
        if (received.length > 1) msg.respond(JSON.stringify({ ok: true, result: 'found' }));
      },
    });
    try {
      await eventually(
        async () => {
          const registered = await api('POST', '/v1/tools', {
            tool: {
              name: 'slow_lookup',
              description: 'Looks something up, slowly.',
              parameters: { type: 'object' },
              policy: { executor: 'remote', risk: 'read', timeoutMs: 120_000 },
            },
          });
          return registered.status === 201 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'the tool to register' },
      );
      const submitted = await api('POST', '/v1/dispatches', {
        runId: 'run-crash',
        callId: 'c1',
        agent: { agentType: 'coder' },
        tool: 'slow_lookup',
        input: {},
      });
      expect(submitted.status).toBe(202);
      const dispatchId = submitted.body.dispatchId as string;
      await eventually(async () => (received.length > 0 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the worker to receive the call',
      });

      // Another replica, ready before the kill (the same configuration, its own process): the
      // call is held by the first, which dies with it.
      standby = await startProcessStack({
        env: stackEnv(nats, schema, workdir, TEST_GRANTS),
        services: ['tool-executor'],
      });
      expect(received).toHaveLength(1);
      await stack.service('tool-executor').kill();
      const view = await eventually(
        async () => {
          const d = await api('GET', `/v1/dispatches/${dispatchId}`);
          return d.body.dispatch?.status === 'settled' ? d.body : undefined;
        },
        // Under the old default ack wait (30 s): one ack wait (5 s) and the run fit with room.
        { timeoutMs: 20_000, what: 'the call settled by the other executor' },
      );
      expect(view.dispatch).toMatchObject({ outcome: 'ok', result: 'found' });
      const types = (view.events as { event: { type: string } }[]).map((e) => e.event.type);
      expect(types.filter((t) => t === 'settled')).toHaveLength(1);
      // Claimed twice (the dead holder, then the takeover), run by the worker twice: the window
      // a crash opens, and only a crash.
      expect(types.filter((t) => t === 'started')).toHaveLength(2);
      expect(received).toHaveLength(2);
    } finally {
      worker.unsubscribe();
    }
  }, 120_000);
});
