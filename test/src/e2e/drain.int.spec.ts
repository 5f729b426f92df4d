import { eventually } from '@toolgate/testing';
import {
  registerRemoteToolWhenServed,
  startTestProcessStack,
  type TestProcessStack,
} from '../support/test-process-stack';
import { TOKENS } from '../support/test-stack';

/**
 * A graceful stop says what it waits for and gives up at TOOLGATE_DRAIN_TIMEOUT_MS: the issue's
 * case, a remote call in flight whose worker never answers (it used to wait out the call's whole
 * deadline, silently).
 */
describe('a stop with a call in flight whose worker is gone (services as processes)', () => {
  let stack: TestProcessStack;

  beforeAll(async () => {
    stack = await startTestProcessStack('drain', {
      envFor: { 'tool-executor': { TOOLGATE_DRAIN_TIMEOUT_MS: '1500' } },
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

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

      const executor = stack.processes.service('tool-executor');
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
