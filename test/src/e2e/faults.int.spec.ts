import { jetstream } from '@nats-io/jetstream';
import { JournalPublisher } from '@toolgate/bus';
import { createDb, compareProjections, readJournal, rebuildProjection } from '@toolgate/journal';
import { eventually, useTestSchema, testJournalKeys, signedHeaders } from '@toolgate/testing';
import { journalCounts, settled } from '../support/dispatch-probes';
import { serveHeldTool, serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const agent = { agentType: 'coder' };
const decoder = new TextDecoder();

describe('faults: crashes, restarts, poison messages and the projection rebuild', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('faults');
  });
  afterAll(() => stack.stop());

  it('redelivers a call whose executor died between started and settled, and settles it once', async () => {
    const calls: number[] = [];
    const worker = await serveRemoteTool(
      stack,
      {
        name: 'slow_once',
        description: 'Answers from the second attempt on.',
        parameters: { type: 'object', properties: {} },
        policy: { timeoutMs: 60_000 },
      },
      () => {
        calls.push(Date.now());
        // The first attempt never answers: its executor dies while waiting.
        return calls.length > 1 ? { ok: true, result: { attempt: calls.length } } : undefined;
      },
    );
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-crash',
      callId: 'c1',
      agent,
      tool: 'slow_once',
      input: {},
    });
    const { dispatchId } = res.body;
    await eventually(() => (calls.length === 1 ? true : undefined), {
      what: 'first attempt started',
    });

    // Crash: the connection goes away without acking, settling or draining.
    const crashed = stack.all.executor;
    await crashed.nc.close();
    await crashed.app.close().catch(() => undefined);

    const replacement = await stack.startExecutor();
    try {
      const view = await settled(stack, dispatchId);
      expect(view.dispatch.result).toEqual({ attempt: 2 });
      expect(calls).toHaveLength(2);
      const types = await journalCounts(stack, 'acme', 'run-crash', dispatchId);
      expect(types.settled).toBe(1);
      expect(types.started).toBe(2);
    } finally {
      worker.stop();
      await replacement.stop();
      // The stack's stop() stops its (already closed) executor again; give it a live one back.
      stack.all.executor = await stack.startExecutor();
    }
  });

  it('loses nothing when every service stops and starts again mid-run', async () => {
    const worker = await serveHeldTool(stack, 'held', 'done', {
      type: 'object',
      properties: { n: { type: 'number' } },
    });
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'shell' }] } },
    });
    const parked = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-restart',
      callId: 'ask-1',
      agent,
      tool: 'shell',
      input: { command: 'echo parked' },
      wait: 5000,
    });
    expect(parked.body.state).toBe('suspended');
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) {
      const r = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'run-restart',
        callId: `h${n}`,
        agent,
        tool: 'held',
        input: { n },
      });
      ids.push(r.body.dispatchId);
    }
    // Queued behind them, not yet evaluated or run when the stop begins.
    for (let n = 0; n < 10; n++) {
      const r = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'run-restart',
        callId: `l${n}`,
        agent,
        tool: 'list_dir',
        input: { path: '.' },
      });
      ids.push(r.body.dispatchId);
    }

    // A graceful stop finishes in-flight work before it drains: release the held calls as it begins.
    const restarting = stack.restart();
    worker.release();
    await restarting;

    for (const id of ids) {
      const d = await settled(stack, id, 30_000);
      expect(d.dispatch.outcome).toBe('ok');
      expect(d.events.filter((e) => e.event.type === 'settled')).toHaveLength(1);
    }
    const run = await stack.http('GET', '/v1/runs/run-restart', TOKENS.acmeAgent);
    expect(run.body.status).toBe('suspended');
    expect(run.body.pending.map((p: { dispatchId: string }) => p.dispatchId)).toEqual([
      parked.body.dispatchId,
    ]);
    worker.stop();
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
  }, 90_000);

  it('dead-letters a poison message and settles its dispatch as an error', async () => {
    const subject = stack.nats.subjects.journal.event(
      'acme',
      'run-poison',
      'dpoison1',
      'requested',
    );
    // A payload from a producer this version cannot read: it must not loop.
    const future = JSON.stringify({ type: 'requested', schemaVersion: 99 });
    await jetstream(stack.nats.nc).publish(subject, future, {
      headers: signedHeaders(subject, future),
    });
    const publisher = new JournalPublisher(stack.nats.nc, stack.nats.subjects, testJournalKeys());
    const settlement = await eventually(
      () => publisher.last('acme', 'run-poison', 'dpoison1', 'settled').then((s) => s ?? undefined),
      {
        what: 'poison settlement',
      },
    );
    expect(settlement.event).toMatchObject({ outcome: 'error', error: { code: 'poison-message' } });
    const dlq = await stack.nats.jsm.streams.getMessage(stack.nats.subjects.deadLetter.stream, {
      last_by_subj: stack.nats.subjects.deadLetter.forRole('evaluator'),
    });
    expect(dlq?.header.get('Toolgate-Original-Subject')).toBe(subject);
    expect(decoder.decode(dlq!.data)).toContain('"schemaVersion":99');
  });

  it('rebuilds a projection from the stream that equals the live one row by row', async () => {
    const js = jetstream(stack.nats.nc);
    const lastSeq = (await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream)).state
      .last_seq;
    const live = await createDb({
      url: stack.schema.url,
      schema: stack.schema.schema,
      migrate: false,
    });
    // Wait for the live projection to have folded everything up to now.
    await eventually(
      async () => {
        const row = await live.db
          .selectFrom('audit_log')
          .select((eb) => eb.fn.max('seq').as('max'))
          .executeTakeFirst();
        return Number(row?.max ?? 0) >= lastSeq ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'live projection caught up' },
    );
    const fresh = await useTestSchema('rebuild');
    const rebuilt = await createDb({ url: fresh.url, schema: fresh.schema });
    try {
      const result = await rebuildProjection(
        rebuilt.db,
        readJournal(js, stack.nats.subjects, { keys: testJournalKeys() }),
      );
      expect(result.lastSeq).toBeGreaterThanOrEqual(lastSeq);
      // Events after lastSeq may have arrived since; compare what both have seen.
      expect(await compareProjections(live.db, rebuilt.db)).toEqual([]);
    } finally {
      await live.db.destroy();
      await rebuilt.db.destroy();
      await fresh.cleanup();
    }
  });
});
