import { createDb } from '@toolgate/journal';
import { eventually } from '@toolgate/testing';
import { serveHeldTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * The all-in-one's stop: the services behind the gateway drain side by side, the journal last, so
 * what their drains appended is in the projection when the stop returns — here, calls that finish
 * well after the stop began (longer than a consumer's pull, which is what each stop waits out).
 */
describe('an all-in-one stop with calls in flight', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('stoporder');
  });
  afterAll(() => stack.stop());

  it('folds the settlements its drain appended before the journal stops', async () => {
    const worker = await serveHeldTool(stack, 'held_at_stop', 'done');
    const ids: string[] = [];
    for (let n = 0; n < 3; n++) {
      const r = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'run-stop-order',
        callId: `s${n}`,
        agent: { agentType: 'coder' },
        tool: 'held_at_stop',
        input: {},
      });
      expect(r.status).toBe(202);
      ids.push(r.body.dispatchId);
    }
    // Every call has started (held by the worker) before the stop begins.
    for (const id of ids) {
      await eventually(
        async () => {
          const d = await stack.http('GET', `/v1/dispatches/${id}`, TOKENS.acmeAgent);
          return d.body?.dispatch?.status === 'started' ? true : undefined;
        },
        { timeoutMs: 10_000, what: `${id} started` },
      );
    }
    const stopping = stack.all.stop();
    await new Promise((r) => setTimeout(r, 1500));
    worker.release();
    await stopping;
    worker.stop();

    const { db } = await createDb({
      url: stack.schema.url,
      schema: stack.schema.schema,
      migrate: false,
    });
    try {
      const rows = await db
        .selectFrom('dispatches')
        .select(['dispatch_id', 'status', 'outcome'])
        .where('dispatch_id', 'in', ids)
        .execute();
      expect(rows.map((r) => [r.status, r.outcome])).toEqual(ids.map(() => ['settled', 'ok']));
    } finally {
      await db.destroy();
    }
  }, 60_000);
});
