import { ensureJournalStreams, JournalPublisher } from '@toolgate/bus';
import {
  dispatchKey,
  ErrorCode,
  ToolgateError,
  journalEvent,
  type RegisteredTool,
  type SettledEvent,
  type WireError,
  type SubmitDispatchRequest,
  type SubmitDispatchResponse,
} from '@toolgate/contracts';
import { ToolRegistry } from '@toolgate/registry';
import { connect, headers as natsHeaders } from '@nats-io/transport-node';
import {
  eventually,
  NATS_URL,
  reForger,
  tcpProxy,
  useTestNats,
  type TestNats,
  testJournalKeys,
  testKeys,
} from '@toolgate/testing';
import type { Principal } from '../auth/token-auth';
import { DispatchSubmitter } from './dispatch-submitter';

const echo: RegisteredTool = {
  name: 'echo',
  description: 'Answers with its input.',
  parameters: { type: 'object', properties: { n: { type: 'number' } } },
  policy: { needsApproval: false, executor: 'inprocess' },
};

function principal(tenant: string): Principal {
  return { tenant, identity: `user:${tenant}`, scopes: new Set(['dispatch']) };
}

function call(callId: string, wait: number): SubmitDispatchRequest {
  return {
    runId: 'run1',
    callId,
    agent: { agentType: 'coder' },
    tool: 'echo',
    input: { n: 1 },
    wait,
  };
}

describe('DispatchSubmitter waiting for outcomes on a real JetStream stream', () => {
  let t: TestNats;
  let publisher: JournalPublisher;
  let registry: ToolRegistry;
  let submitter: DispatchSubmitter;

  beforeAll(async () => {
    t = await useTestNats('gateway-submit');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
    registry = await ToolRegistry.open(t.nc, t.subjects);
    await registry.announce([echo], ['inprocess']);
    submitter = newSubmitter();
  });
  afterAll(async () => {
    submitter?.stop();
    registry?.stop();
    await t?.cleanup();
  });

  function newSubmitter(): DispatchSubmitter {
    return new DispatchSubmitter(t.nc, t.subjects, publisher, registry, {
      waitDefaultMs: 20_000,
      now: () => new Date(),
    });
  }

  function idOf(tenant: string, req: SubmitDispatchRequest): string {
    const tool = registry.resolve(tenant, req.tool)!;
    return dispatchKey({
      tenant,
      runId: req.runId,
      callId: req.callId,
      toolName: tool.name,
      contractHash: tool.contractHash,
      input: req.input,
    });
  }

  /** A `settled` of a dispatch of run1 as the executor writes it, with `id` and how it ended. */
  function settledEvent(
    tenant: string,
    dispatchId: string,
    id: string,
    ending: { outcome: 'ok'; result: unknown } | { outcome: 'error'; error: WireError },
  ): SettledEvent {
    return journalEvent({
      type: 'settled',
      id,
      tenant,
      runId: 'run1',
      dispatchId,
      at: new Date().toISOString(),
      causationId: `${dispatchId}:started`,
      toolName: 'echo',
      ...ending,
      durationMs: 1,
      attempt: 1,
    }) as SettledEvent;
  }

  /** Journals a `settled` for a dispatch, as the executor would. */
  async function settle(tenant: string, dispatchId: string, result: unknown): Promise<void> {
    const appended = await publisher.append(
      settledEvent(tenant, dispatchId, `${dispatchId}:settled`, { outcome: 'ok', result }),
    );
    expect(appended.appended).toBe(true);
  }

  /** Resolves once `requested` is journaled for the dispatch, the submission's own first step. */
  async function journaled(tenant: string, dispatchId: string): Promise<void> {
    await eventually(() => publisher.last(tenant, 'run1', dispatchId, 'requested').then(found), {
      what: `${dispatchId} requested`,
    });
  }

  /** Whether the promise is still pending after the broker and the event loop had their turn. */
  async function pending(promise: Promise<unknown>): Promise<boolean> {
    await t.nc.flush();
    const marker = Symbol('pending');
    return (await Promise.race([promise, Promise.resolve(marker)])) === marker;
  }

  it('answers two concurrent waits on the same dispatch with its outcome', async () => {
    const req = call('twice', 20_000);
    const dispatchId = idOf('acme', req);
    // The same call submitted twice: one journals it, the other is a replay that must wait too.
    const first = submitter.submit(principal('acme'), req);
    const second = submitter.submit(principal('acme'), req);
    await journaled('acme', dispatchId);
    // Let the replay find no recorded outcome and start waiting.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await pending(first)).toBe(true);
    expect(await pending(second)).toBe(true);

    await settle('acme', dispatchId, { echoed: 1 });

    const answers = await Promise.all([first, second]);
    expect(answers.map((a) => a.status).sort()).toEqual(['accepted', 'replayed']);
    for (const answer of answers) {
      expect(answer).toEqual<SubmitDispatchResponse>({
        dispatchId,
        status: answer.status,
        state: 'settled',
        settled: { outcome: 'ok', result: { echoed: 1 } },
      });
    }
  });

  it("does not wake a tenant's waiter with another tenant's outcome for the same run and dispatch id", async () => {
    const req = call('isolated', 20_000);
    const dispatchId = idOf('acme', req);
    const waiting = submitter.submit(principal('acme'), req);
    await journaled('acme', dispatchId);

    // Same runId and dispatch id, another tenant: published first, on the same connection, so it
    // reaches the submitter before acme's own outcome does.
    await settle('globex', dispatchId, { tenant: 'globex' });
    expect(await pending(waiting)).toBe(true);
    await settle('acme', dispatchId, { tenant: 'acme' });

    expect(await waiting).toMatchObject({
      dispatchId,
      status: 'accepted',
      state: 'settled',
      settled: { outcome: 'ok', result: { tenant: 'acme' } },
    });
  });

  it('answers a wait with the outcome the journal recorded, not a genuine one the stream refused', async () => {
    const req = call('refused', 20_000);
    const dispatchId = idOf('acme', req);
    const waiting = submitter.submit(principal('acme'), req);
    await journaled('acme', dispatchId);
    // A genuine settlement the stream refuses (an expectation that fails, as a second one's does
    // on a cluster when another was recorded first): the broker still hands it to every core
    // subscriber, and the gateway's node may hear it before the recorded one.
    const other = settledEvent('acme', dispatchId, `${dispatchId}:settled:other`, {
      outcome: 'error',
      error: { code: 'timeout', message: 'the other settlement' },
    });
    const subject = t.subjects.journal.event('acme', 'run1', dispatchId, 'settled');
    const payload = new TextEncoder().encode(JSON.stringify(other));
    const refusedHeaders = natsHeaders();
    testKeys('tool-executor').signEvent(subject, 'settled', payload, refusedHeaders);
    refusedHeaders.set('Nats-Expected-Last-Subject-Sequence', '999999');
    // The stream answers with its refusal (wrong last sequence), stores nothing.
    const answer = await t.nc.request(subject, payload, {
      headers: refusedHeaders,
      timeout: 5_000,
    });
    expect(answer.json()).toMatchObject({ error: { err_code: 10071 } });
    expect(await publisher.last('acme', 'run1', dispatchId, 'settled')).toBeNull();
    expect(await pending(waiting)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await pending(waiting)).toBe(true);

    await settle('acme', dispatchId, { recorded: true });
    expect(await waiting).toMatchObject({
      dispatchId,
      state: 'settled',
      settled: { outcome: 'ok', result: { recorded: true } },
    });
  });

  it('awaits the recorded outcome of a dispatch: not a forged settlement, the recorded one, and not-found for none', async () => {
    const req = call('awaited', 0);
    const dispatchId = idOf('acme', req);
    await submitter.submit(principal('acme'), req);
    const ask = (wait: number) =>
      submitter.awaitOutcome(principal('acme'), { runId: 'run1', dispatchId, wait });
    expect(await ask(0)).toEqual({ dispatchId, state: 'pending' });
    const waiting = ask(20_000);
    // Unsigned, on the dispatch's own subject, and stored by the open broker: nobody's record.
    const forged = settledEvent('acme', dispatchId, `${dispatchId}:settled`, {
      outcome: 'ok',
      result: { forged: true },
    });
    t.nc.publish(
      t.subjects.journal.event('acme', 'run1', dispatchId, 'settled'),
      new TextEncoder().encode(JSON.stringify(forged)),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await pending(waiting)).toBe(true);
    expect(await ask(0)).toEqual({ dispatchId, state: 'pending' });

    await settle('acme', dispatchId, { recorded: true });
    const recorded = { outcome: 'ok', result: { recorded: true } };
    expect(await waiting).toEqual({ dispatchId, state: 'settled', settled: recorded });
    expect(await ask(0)).toEqual({ dispatchId, state: 'settled', settled: recorded });
    // Another tenant's token names the same run and dispatch: it has none.
    await expect(
      submitter.awaitOutcome(principal('other'), { runId: 'run1', dispatchId, wait: 0 }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(
      submitter.awaitOutcome(principal('acme'), { runId: 'run1', dispatchId: 'nope', wait: 0 }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(
      submitter.awaitOutcome(principal('acme'), { runId: 'run.1', dispatchId, wait: 0 }),
    ).rejects.toMatchObject({ code: ErrorCode.InvalidRequest });
  });

  it('answers a wait with `requested` when no outcome comes in time', async () => {
    const answer = await submitter.submit(principal('acme'), call('slow', 300));
    expect(answer).toMatchObject({ status: 'accepted', state: 'requested' });
    expect(answer.settled).toBeUndefined();
  });

  it('a call that forgeries keep out of the journal answers unavailable (retryable), not replayed; the retry is accepted', async () => {
    const req = call('forged-out', 0);
    const dispatchId = idOf('acme', req);
    // The gateway behind a slow link, against a client that re-forges the call's `requested`.
    const forger = await reForger(
      t,
      t.subjects.journal.event('acme', 'run1', dispatchId, 'requested'),
    );
    let slow: DispatchSubmitter | undefined;
    try {
      const slowNc = await forger.victim();
      slow = new DispatchSubmitter(
        slowNc,
        t.subjects,
        new JournalPublisher(slowNc, t.subjects, testJournalKeys()),
        registry,
        { waitDefaultMs: 1000, now: () => new Date() },
      );
      const err = await slow.submit(principal('acme'), req).then(
        () => undefined,
        (e: unknown) => e,
      );
      forger.stop();
      expect(err).toBeInstanceOf(ToolgateError);
      expect((err as ToolgateError).code).toBe(ErrorCode.Unavailable);
      expect((err as ToolgateError).details).toMatchObject({ retryable: true, dispatchId });
      expect(await publisher.last('acme', 'run1', dispatchId, 'requested')).toBeNull();
      // The attacker gone, the caller's retry of the same call is recorded.
      expect(await slow.submit(principal('acme'), req)).toMatchObject({
        dispatchId,
        status: 'accepted',
      });
      expect((await publisher.last('acme', 'run1', dispatchId, 'requested'))?.event).toMatchObject({
        callId: 'forged-out',
      });
    } finally {
      slow?.stop();
      await forger.close();
    }
  });

  it('answers a wait with the outcome journaled while its connection was down, once it is back', async () => {
    // The gateway's link to the broker, as a node of a cluster dying and the client moving on.
    const link = await tcpProxy({ host: '127.0.0.1', port: Number(new URL(NATS_URL).port) });
    await link.listen();
    const nc = await connect({
      servers: `nats://127.0.0.1:${link.port}`,
      reconnectTimeWait: 100,
      maxReconnectAttempts: -1,
    });
    const own = new DispatchSubmitter(
      nc,
      t.subjects,
      new JournalPublisher(nc, t.subjects, testJournalKeys()),
      registry,
      { waitDefaultMs: 20_000, now: () => new Date() },
    );
    try {
      const req = call('across-a-reconnect', 60_000);
      const dispatchId = idOf('acme', req);
      const waiting = own.submit(principal('acme'), req);
      await journaled('acme', dispatchId);
      expect(await pending(waiting)).toBe(true);
      await link.cut();
      // Settled while the submitter's subscription hears nothing.
      await settle('acme', dispatchId, { across: 'reconnect' });
      expect(await pending(waiting)).toBe(true);
      await link.listen();
      // Answered once reconnected, long before its 60 s wait would have run out.
      const outOfTime = new Promise((resolve) =>
        setTimeout(() => resolve('still waiting'), 15_000),
      );
      expect(await Promise.race([waiting, outOfTime])).toMatchObject({
        dispatchId,
        status: 'accepted',
        state: 'settled',
        settled: { outcome: 'ok', result: { across: 'reconnect' } },
      });
    } finally {
      own.stop();
      await nc.close();
      await link.cut();
    }
  }, 30_000);

  it('stop releases a caller still waiting, and later submissions do not wait', async () => {
    const own = newSubmitter();
    const req = call('at-stop', 60_000);
    const waiting = own.submit(principal('acme'), req);
    await journaled('acme', idOf('acme', req));
    expect(await pending(waiting)).toBe(true);

    const started = Date.now();
    own.stop();
    expect(await waiting).toMatchObject({ status: 'accepted', state: 'requested' });
    const after = await own.submit(principal('acme'), call('after-stop', 60_000));
    expect(after).toMatchObject({ status: 'accepted', state: 'requested' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('DispatchSubmitter subscriptions on the broker', () => {
  // A prefix without a journal stream: the only interest in its journal subjects is the
  // submitter's, which a request with nobody to answer it reveals (timeout: someone is subscribed;
  // "no responders": nobody is).
  let t: TestNats;
  let registry: ToolRegistry;

  beforeAll(async () => {
    t = await useTestNats('gateway-subs');
    registry = await ToolRegistry.open(t.nc, t.subjects);
  });
  afterAll(async () => {
    registry?.stop();
    await t?.cleanup();
  });

  async function interest(type: 'settled' | 'suspended'): Promise<'subscribed' | 'none'> {
    const subject = t.subjects.journal.event('acme', 'run1', 'd'.repeat(64), type);
    try {
      // 2 s, not 500 ms: "no responders" is an answer that must come first, and a loaded machine
      // can hold this process past a short timer before it reads it.
      await t.nc.request(subject, undefined, { timeout: 2000 });
    } catch (err) {
      if (/no responders/i.test(errorText(err))) return 'none';
      if (/timeout/i.test(errorText(err))) return 'subscribed';
      throw err;
    }
    throw new Error(`${subject} was answered`);
  }

  it('holds one subscription per outcome type until stopped, then none', async () => {
    expect([await interest('settled'), await interest('suspended')]).toEqual(['none', 'none']);

    const submitter = new DispatchSubmitter(
      t.nc,
      t.subjects,
      new JournalPublisher(t.nc, t.subjects, testJournalKeys()),
      registry,
      { waitDefaultMs: 1000, now: () => new Date() },
    );
    expect([await interest('settled'), await interest('suspended')]).toEqual([
      'subscribed',
      'subscribed',
    ]);

    submitter.stop();
    submitter.stop();
    expect([await interest('settled'), await interest('suspended')]).toEqual(['none', 'none']);
  });
});

function found<T>(value: T | null): T | undefined {
  return value ?? undefined;
}

/** An error's name and message and its cause's: which one says "no responders" varies by client version. */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? ` ${err.cause.name} ${err.cause.message}` : '';
  return `${err.name} ${err.message}${cause}`;
}
