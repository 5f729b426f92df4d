import { eventually } from '@toolgate/testing';
import type { ServiceProcess } from '../support/process-stack';
import {
  registerRemoteToolWhenServed,
  startTestProcessStack,
  type TestProcessStack,
} from '../support/test-process-stack';
import { TOKENS } from '../support/test-stack';

/**
 * An executor process that goes with a call in flight, on one stack of processes (starting one
 * costs four processes' start-up, so the two cases share it, in this order):
 *
 * - killed (SIGKILL) in the middle of a call, with the services' own settings (the ack wait is the
 *   executor's default): the call goes to another executor within seconds — one ack wait, renewed
 *   by heartbeats while the call ran — and settles once. (The old default ack wait, 30 s, and the
 *   manifest's 90 s stranded it that long.)
 * - stopped gracefully while a remote call whose worker never answers is in flight: the stop says
 *   what it waits for and gives up at TOOLGATE_DRAIN_TIMEOUT_MS (the case: it used to wait
 *   out the call's whole deadline, silently). The executor stopped is the one that took over from
 *   the killed one.
 */
describe('an executor killed or stopped mid-call (services as processes)', () => {
  let stack: TestProcessStack;
  /** The executor running now: the stack's own, then the one started to take over from it. */
  let executor: ServiceProcess;

  beforeAll(async () => {
    stack = await startTestProcessStack('crash', {
      services: ['journal', 'permission-evaluator', 'tool-executor', 'gateway'],
      // Only a graceful stop reads it (the drain case); a kill leaves no time to.
      envFor: { 'tool-executor': { TOOLGATE_DRAIN_TIMEOUT_MS: '1500' } },
    });
    executor = stack.processes.service('tool-executor');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  const api = (method: string, route: string, body?: unknown) =>
    stack.http(method, route, TOKENS.acmeAdmin, body);

  it('settles the call on another executor within seconds, once', async () => {
    // The worker holds the first request (its executor dies with it) and answers the others.
    const { subject, queue } = stack.nats.subjects.remoteTool('acme', 'slow_lookup');
    const received: number[] = [];
    const worker = stack.nats.nc.subscribe(subject, {
      queue,
      callback: (_err, msg) => {
        received.push(Date.now());
        if (received.length > 1) msg.respond(JSON.stringify({ ok: true, result: 'found' }));
      },
    });
    try {
      await registerRemoteToolWhenServed(stack, TOKENS.acmeAdmin, {
        name: 'slow_lookup',
        description: 'Looks something up, slowly.',
      });
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
      const replacement = (await stack.startMore(['tool-executor'])).service('tool-executor');
      expect(received).toHaveLength(1);
      await executor.kill();
      executor = replacement;
      const view = await eventually(
        async () => {
          const d = await api('GET', `/v1/dispatches/${dispatchId}`);
          return d.body.dispatch?.status === 'settled' ? d.body : undefined;
        },
        // Under the old default ack wait (30 s): one ack wait (5 s) and the run fit with room.
        // Asked every 200 ms, not 25: a takeover takes seconds, and each question is a request
        // through the gateway and a query of the journal's.
        { timeoutMs: 20_000, intervalMs: 200, what: 'the call settled by the other executor' },
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

  it('names the call it waits for, then exits at the drain cap instead of the call deadline', async () => {
    // A worker that takes every request and never answers: the call waits for its deadline.
    const { subject, queue } = stack.nats.subjects.remoteTool('acme', 'hangs');
    const received: string[] = [];
    const worker = stack.nats.nc.subscribe(subject, {
      queue,
      callback: (_err, msg) => void received.push(msg.subject),
    });
    try {
      await registerRemoteToolWhenServed(stack, TOKENS.acmeAdmin, {
        name: 'hangs',
        description: 'Never answers.',
      });
      const submitted = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAdmin, {
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
