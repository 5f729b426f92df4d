import { eventually } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { gatedTool, park, resolve, type CountingTool } from './approval-helpers';

interface SseEvent {
  event: string;
  data: any;
}

/** Reads a server-sent-events stream with `fetch` into a list, until closed. */
async function openEvents(
  stack: TestStack,
  token: string,
): Promise<{
  events: SseEvent[];
  comments: string[];
  /** Settles when the server ends the stream. */
  ended: Promise<void>;
  close(): Promise<void>;
}> {
  const abort = new AbortController();
  const res = await fetch(`${stack.all.gateway.url}/v1/approvals/events`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const reading = (async () => {
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n');
          for (const c of lines.filter((l) => l.startsWith(':'))) comments.push(c.slice(1).trim());
          const event = lines.find((l) => l.startsWith('event: '))?.slice('event: '.length);
          const data = lines
            .filter((l) => l.startsWith('data: '))
            .map((l) => l.slice('data: '.length))
            .join('\n');
          if (event) events.push({ event, data: JSON.parse(data) });
        }
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  })();
  await eventually(() => (comments.includes('connected') ? true : undefined), {
    what: 'stream connected',
  });
  return {
    events,
    comments,
    ended: reading,
    async close() {
      abort.abort();
      await reading;
    },
  };
}

describe('approvals: the server-sent-events stream', () => {
  let stack: TestStack;
  let gated: CountingTool;

  beforeAll(async () => {
    stack = await startTestStack('approvals-sse');
    gated = await gatedTool(stack);
  });
  afterAll(async () => {
    gated?.stop();
    await stack.stop();
  });

  it('misses no notification published as soon as the stream has answered', async () => {
    // What the console relies on: once the stream has answered, the gateway's subscription is at
    // the broker (it flushes it before answering), so a notification published on another
    // connection the moment the headers arrive is delivered.
    for (let i = 0; i < 20; i++) {
      const abort = new AbortController();
      const res = await fetch(`${stack.all.gateway.url}/v1/approvals/events`, {
        headers: { authorization: `Bearer ${TOKENS.acmeAgent}` },
        signal: abort.signal,
      });
      expect(res.status).toBe(200);
      const probe = `probe-${i}`;
      stack.nats.nc.publish(
        stack.nats.subjects.approvals('acme', 'pending'),
        JSON.stringify({ dispatchId: probe }),
      );
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!text.includes(`"dispatchId":"${probe}"`)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${probe}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
      expect(text).toContain(`event: approval:pending\ndata: {"dispatchId":"${probe}"}`);
      abort.abort();
    }
  });

  it("delivers approval:pending then approval:resolved to the tenant's approvers, and nothing to another tenant", async () => {
    const acme = await openEvents(stack, TOKENS.acmeApprover);
    const globex = await openEvents(stack, TOKENS.globexAdmin);
    try {
      const parked = await park(stack, 'gated');
      const pending = await eventually(
        () =>
          acme.events.find(
            (e) => e.event === 'approval:pending' && e.data.dispatchId === parked.dispatchId,
          ),
        { timeoutMs: 20_000, what: 'approval:pending on the stream' },
      );
      expect(pending.data).toMatchObject({
        type: 'suspended',
        tenant: 'acme',
        runId: parked.runId,
        approvalKey: parked.approval.approvalKey,
        tool: expect.objectContaining({ name: 'gated' }),
        input: parked.input,
        expiresAt: parked.approval.expiresAt,
      });

      expect(
        (
          await resolve(stack, parked.approval.approvalKey, {
            decision: 'allow',
            reason: 'seen on the dashboard',
          })
        ).status,
      ).toBe(200);
      const resolved = await eventually(
        () =>
          acme.events.find(
            (e) => e.event === 'approval:resolved' && e.data.dispatchId === parked.dispatchId,
          ),
        { timeoutMs: 20_000, what: 'approval:resolved on the stream' },
      );
      expect(resolved.data).toMatchObject({
        type: 'resolved',
        tenant: 'acme',
        approvalKey: parked.approval.approvalKey,
        decision: 'allow',
        reason: 'seen on the dashboard',
        by: 'acme-approver',
        source: 'human',
      });
      const ours = acme.events
        .filter((e) => e.data.dispatchId === parked.dispatchId)
        .map((e) => e.event);
      expect(ours).toEqual(['approval:pending', 'approval:resolved']);
      await settled(stack, parked.dispatchId);

      // A globex event on globex's stream proves that stream is live; acme's never reach it.
      const globexWorker = await serveRemoteTool(
        stack,
        {
          name: 'gated',
          description: 'globex copy',
          parameters: { type: 'object', properties: {} },
        },
        () => ({ ok: true, result: null }),
        { tenant: 'globex', token: TOKENS.globexAdmin },
      );
      try {
        expect(
          (
            await stack.http('PUT', '/v1/policy', TOKENS.globexAdmin, {
              document: { engine: { ask: [{ tool: 'gated' }] } },
            })
          ).status,
        ).toBe(200);
        const g = await stack.http('POST', '/v1/dispatches', TOKENS.globexAdmin, {
          runId: 'globex-run',
          callId: 'g1',
          agent: { agentType: 'coder' },
          tool: 'gated',
          input: {},
          wait: 10_000,
        });
        expect(g.body.state).toBe('suspended');
        await eventually(
          () =>
            globex.events.find(
              (e) => e.event === 'approval:pending' && e.data.dispatchId === g.body.dispatchId,
            ),
          { timeoutMs: 20_000, what: "globex's own approval:pending" },
        );
        expect(globex.events.filter((e) => e.data.tenant !== 'globex')).toEqual([]);
        expect(acme.events.filter((e) => e.data.tenant !== 'acme')).toEqual([]);
      } finally {
        globexWorker.stop();
      }
    } finally {
      await acme.close();
      await globex.close();
    }
  });
});

describe('approvals: a stop with consoles open', () => {
  it('ends every open stream with server:restarting instead of waiting on them', async () => {
    const stack = await startTestStack('approvals-sse-stop');
    try {
      const streams = await Promise.all(
        Array.from({ length: 10 }, () => openEvents(stack, TOKENS.acmeApprover)),
      );
      let ended = 0;
      for (const s of streams) void s.ended.then(() => ended++);
      // The gateway's stop: it used to wait for the ten streams (in flight to the HTTP server)
      // until its drain cap, while each console still said "Live".
      const stopped = stack.all.gateway.stop();
      await stopped;
      // Every stream heard why before it ended, and ended from the server's side: none of them
      // was closed by this test.
      await Promise.all(streams.map((s) => s.ended));
      expect(ended).toBe(10);
      for (const s of streams)
        expect(s.events).toEqual([
          { event: 'server:restarting', data: { message: 'server restarting — reconnecting' } },
        ]);
    } finally {
      await stack.stop();
    }
  }, 60_000);
});
