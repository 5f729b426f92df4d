import { z } from 'zod';
import { NATS_URL, eventually } from '@toolgate/testing';
import {
  createClient,
  hasErrorCode,
  ModelRetry,
  PageLimit,
  tool,
  ToolgateError,
  type ApprovalPendingEvent,
  type DispatchEvent,
  type ToolEndEvent,
  type ToolLogEntry,
  type ToolStartEvent,
  type ToolgateClient,
} from '@toolgate/sdk';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/** Compile-time equality: `Assert<Equal<A, B>>` fails typecheck unless A and B are the same type. */
type Equal<A, B> =
  (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;

/** Every field the reference's ToolEvents (003) allows, per event type. */
const START_FIELDS = ['type', 'toolName', 'toolCallId', 'risk'];
const END_FIELDS = [
  'type',
  'toolName',
  'toolCallId',
  'outcome',
  'durationMs',
  'errorCode',
  'verdict',
  'decidedBy',
  'rule',
  'advisory',
  'guard',
];

const agent = { agentType: 'coder', label: 'sdk-test' };

const greet = tool({
  name: 'sdk_greet',
  description: 'Greets someone, a few times.',
  parameters: z.object({
    name: z.string().refine((s) => !s.includes('!'), 'no exclamation marks in names'),
    times: z.number().int().min(1).max(3),
  }),
  risk: 'read',
  async execute({ name, times }, ctx) {
    ctx.log('info', 'greeting', { name });
    greetRuns++;
    return {
      greeting: Array.from({ length: times }, () => `hello ${name}`).join(', '),
      runId: ctx.runId,
      dispatchId: ctx.dispatchId,
      spanId: ctx.spanId,
      agent: ctx.agent,
      isolation: ctx.isolation,
      aborted: ctx.signal.aborted,
    };
  },
});
let greetRuns = 0;

// The input and result types flow from the zod schema: checked by `tsc`, not at run time.
type _GreetInput = Assert<
  Equal<Parameters<typeof greet.execute>[0], { name: string; times: number }>
>;

describe('@toolgate/sdk against the whole stack', () => {
  let stack: TestStack;
  let client: ToolgateClient;
  const logs: ToolLogEntry[] = [];
  /** An acme client on the stack's prefix, acting with `token`. */
  const clientWith = (token: string) =>
    createClient({ servers: NATS_URL, prefix: stack.nats.prefix, token, tenant: 'acme' });

  beforeAll(async () => {
    stack = await startTestStack('sdk');
    client = await clientWith(TOKENS.acmeAdmin);
    await client.registerTool(greet);
    client.serveTool(greet, { log: (e) => logs.push(e) });
  });
  afterAll(async () => {
    await client.close();
    await stack.stop();
  });

  it('dispatches a remote tool served by serveTool, with a typed result and the 003 tool:start/tool:end events', async () => {
    const handle = await client.dispatch({
      runId: 'sdk-run-1',
      callId: 'call-1',
      agent,
      tool: greet,
      input: { name: 'ada', times: 2 },
    });
    const events: DispatchEvent[] = [];
    handle.on('tool:start', (e) => events.push(e)).on('tool:end', (e) => events.push(e));
    const outcome = await handle.result;
    expect(outcome.outcome).toBe('ok');
    if (outcome.outcome !== 'ok') throw new Error('unreachable');
    // `outcome.result` is typed from execute's return type: this line would not compile otherwise.
    const greeting: string = outcome.result.greeting;
    expect(greeting).toBe('hello ada, hello ada');
    expect(outcome.result).toMatchObject({
      runId: 'sdk-run-1',
      dispatchId: handle.dispatchId,
      agent,
      isolation: 'none',
      aborted: false,
    });
    expect(outcome.result.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(logs).toContainEqual({
      level: 'info',
      message: 'greeting',
      data: { name: 'ada' },
      toolName: 'sdk_greet',
      dispatchId: handle.dispatchId,
      runId: 'sdk-run-1',
    });

    const start = await eventually(() =>
      events.find((e): e is ToolStartEvent => e.type === 'tool:start'),
    );
    const end = await eventually(() =>
      events.find((e): e is ToolEndEvent => e.type === 'tool:end'),
    );
    expect(start).toEqual({
      type: 'tool:start',
      toolName: 'sdk_greet',
      toolCallId: 'call-1',
      risk: 'read',
    });
    expect(end).toMatchObject({
      type: 'tool:end',
      toolName: 'sdk_greet',
      toolCallId: 'call-1',
      outcome: 'ok',
      verdict: 'allow',
      decidedBy: 'default',
    });
    expect(typeof end.durationMs).toBe('number');
    expect(end.errorCode).toBeUndefined();
    expect(Object.keys(start).filter((k) => !START_FIELDS.includes(k))).toEqual([]);
    expect(Object.keys(end).filter((k) => !END_FIELDS.includes(k))).toEqual([]);
    expect(events.map((e) => e.type)).toEqual(['tool:start', 'tool:end']);
  });

  it('replays the same call from the recorded outcome without running the tool again', async () => {
    const call = {
      runId: 'sdk-run-replay',
      callId: 'call-r',
      agent,
      tool: greet,
      input: { name: 'grace', times: 1 },
    };
    const first = await client.dispatch(call);
    const recorded = await first.result;
    const runsAfterFirst = greetRuns;
    // Folded first, so the replay finds the call's history to surface.
    await eventually(async () =>
      (recordedEventTypes(await client.getDispatch(first.dispatchId)) ?? []).includes('settled')
        ? true
        : undefined,
    );
    const again = await client.dispatch(call);
    expect(again.status).toBe('replayed');
    expect(again.dispatchId).toBe(first.dispatchId);
    expect(await again.result).toEqual(recorded);
    expect(greetRuns).toBe(runsAfterFirst);
    // The replay surfaces the recorded events too, to a listener added after dispatch().
    const ends: unknown[] = [];
    again.on('tool:end', (e) => ends.push(e));
    expect(await eventually(() => ends[0])).toMatchObject({ outcome: 'ok' });
  });

  it("validates the input with the tool's own schema: a refinement JSON Schema cannot carry gives invalid-arguments", async () => {
    const runsBefore = greetRuns;
    const handle = await client.dispatch({
      runId: 'sdk-run-2',
      callId: 'call-bad',
      agent,
      tool: greet,
      input: { name: 'ada!', times: 1 },
    });
    const ends: ToolEndEvent[] = [];
    handle.on('tool:end', (e) => ends.push(e));
    const outcome = await handle.result;
    expect(outcome).toMatchObject({ outcome: 'error', error: { code: 'invalid-arguments' } });
    expect(JSON.stringify(outcome.error?.details)).toContain('no exclamation marks in names');
    expect(greetRuns).toBe(runsBefore);
    expect((await eventually(() => ends[0])).errorCode).toBe('invalid-arguments');
  });

  it('surfaces a ModelRetry thrown by the tool as a model-retry error', async () => {
    const search = tool({
      name: 'sdk_search',
      description: 'Searches, but only plain keywords.',
      parameters: z.object({ query: z.string() }),
      execute: ({ query }) => {
        if (/[:()]/.test(query))
          throw new ModelRetry('Malformed query; use plain keywords, no operators.');
        return { hits: [] as string[] };
      },
    });
    await client.registerTool(search);
    const served = client.serveTool(search);
    try {
      const handle = await client.dispatch({
        runId: 'sdk-run-3',
        callId: 'call-mr',
        agent,
        tool: search,
        input: { query: 'title:(foo)' },
      });
      const ends: ToolEndEvent[] = [];
      handle.on('tool:end', (e) => ends.push(e));
      expect(await handle.result).toEqual({
        outcome: 'error',
        error: {
          code: 'model-retry',
          message: 'Malformed query; use plain keywords, no operators.',
        },
      });
      expect(await eventually(() => ends[0])).toMatchObject({
        outcome: 'error',
        errorCode: 'model-retry',
      });
    } finally {
      await served.stop();
    }
  });

  it('emits approval:pending on an ask, and resolveExternal(allow) runs the call once', async () => {
    let deploys = 0;
    const deploy = tool({
      name: 'sdk_deploy',
      description: 'Deploys a service.',
      parameters: z.object({ service: z.string() }),
      risk: 'execute',
      execute: ({ service }) => {
        deploys++;
        return { deployed: service };
      },
    });
    await client.registerTool(deploy);
    const served = client.serveTool(deploy);
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'sdk_deploy' }] } },
    });
    expect(put.status).toBe(200);
    try {
      const handle = await client.dispatch({
        runId: 'sdk-run-ask',
        callId: 'call-d',
        agent,
        tool: deploy,
        input: { service: 'api' },
      });
      const pending = await new Promise<ApprovalPendingEvent>((resolve) =>
        handle.on('approval:pending', resolve),
      );
      expect(pending).toMatchObject({
        type: 'approval:pending',
        dispatchId: handle.dispatchId,
        toolName: 'sdk_deploy',
        input: { service: 'api' },
        onTimeout: 'deny',
      });
      expect(pending.key).toMatch(/^[0-9a-f]{64}$/);
      expect(Date.parse(pending.expiresAt)).toBeGreaterThan(Date.now());
      expect(deploys).toBe(0);

      const { resolved } = await handle.resolveExternal(pending.key, {
        decision: 'allow',
        reason: 'reviewed by ops',
      });
      expect(resolved).toMatchObject({
        decision: 'allow',
        reason: 'reviewed by ops',
        by: 'acme-admin',
        source: 'human',
      });
      expect(await handle.result).toEqual({ outcome: 'ok', result: { deployed: 'api' } });
      expect(deploys).toBe(1);

      // A second resolution loses at the broker, and says so with a typed error.
      const again = await handle
        .resolveExternal(pending.key, { decision: 'deny' })
        .catch((e: unknown) => e);
      expect(hasErrorCode(again, 'already-resolved')).toBe(true);
    } finally {
      await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
      await served.stop();
    }
  });

  it('lists and resolves approvals through client.approvals (deny settles as denied with the reason)', async () => {
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'shell' }] } },
    });
    expect(put.status).toBe(200);
    try {
      const handle = await client.dispatch({
        runId: 'sdk-run-list',
        callId: 'call-s',
        agent,
        tool: 'shell',
        input: { command: 'echo sdk' },
      });
      const listed = await eventually(async () => {
        const rows = await client.approvals.list({ runId: 'sdk-run-list' });
        return rows.length ? rows : undefined;
      });
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({
        dispatchId: handle.dispatchId,
        toolName: 'shell',
        status: 'pending',
        inputPreview: { summary: 'echo sdk', truncated: false },
      });
      // The list previews the input; the approval itself has all of it.
      const detail = await client.approvals.get(listed[0]!.approvalKey, {
        dispatchId: handle.dispatchId,
      });
      expect(detail.approval.input).toEqual({ command: 'echo sdk' });
      await client.approvals.resolve(listed[0]!.approvalKey, {
        decision: 'deny',
        reason: 'not today',
      });
      const outcome = await handle.result;
      expect(outcome.outcome).toBe('denied');
      expect(outcome.error?.message).toContain('not today');
    } finally {
      await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
    }
  });

  it("fires the tool's AbortSignal at the request deadline", async () => {
    let sawAbort = false;
    const slow = tool({
      name: 'sdk_slow',
      description: 'Waits until it is told to stop.',
      parameters: z.object({}),
      timeoutMs: 300,
      execute: (_input, ctx) =>
        new Promise<never>((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            sawAbort = true;
            reject(new Error('aborted'));
          });
        }),
    });
    await client.registerTool(slow);
    const served = client.serveTool(slow);
    try {
      const handle = await client.dispatch({
        runId: 'sdk-run-slow',
        callId: 'call-slow',
        agent,
        tool: slow,
        input: {},
      });
      expect(await handle.result).toMatchObject({ outcome: 'error', error: { code: 'timeout' } });
      await eventually(() => (sawAbort ? true : undefined), {
        what: 'the tool to see its signal fire',
      });
    } finally {
      await served.stop();
    }
  });

  it('stop() finishes the calls in flight before it resolves', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    const gated = tool({
      name: 'sdk_gated',
      description: 'Finishes when the test says so.',
      parameters: z.object({}),
      execute: async () => {
        started = true;
        await gate;
        return { done: true };
      },
    });
    await client.registerTool(gated);
    const served = client.serveTool(gated);
    const handle = await client.dispatch({
      runId: 'sdk-run-gated',
      callId: 'call-g',
      agent,
      tool: gated,
      input: {},
    });
    await eventually(() => (started ? true : undefined), { what: 'the tool to start' });
    let stopped = false;
    const stopping = served.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(await handle.result).toEqual({ outcome: 'ok', result: { done: true } });
  });

  it("pages with the contracts' limits: the largest page is taken, one more is invalid-request", async () => {
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: unknown) => (e as ToolgateError).code,
      );
    expect(await code(client.approvals.listPage({ limit: PageLimit.approvals.max }))).toBe('ok');
    expect(await code(client.approvals.list({ limit: PageLimit.approvals.max + 1 }))).toBe(
      'invalid-request',
    );
    expect(await code(client.getRun('sdk-run', { limit: PageLimit.runDispatches.max }))).not.toBe(
      'invalid-request',
    );
    expect(await code(client.getRun('sdk-run', { limit: PageLimit.runDispatches.max + 1 }))).toBe(
      'invalid-request',
    );
  });

  it('rejects failed API calls with typed errors, checked by code', async () => {
    const unknown = await client
      .dispatch({ runId: 'sdk-run-err', callId: 'call-x', agent, tool: 'no_such_tool', input: {} })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ToolgateError);
    expect((unknown as ToolgateError).code).toBe('unknown-tool');

    const agentClient = await clientWith(TOKENS.acmeAgent);
    try {
      const forbidden = await agentClient.registerTool(greet).catch((e: unknown) => e);
      expect(hasErrorCode(forbidden, 'forbidden')).toBe(true);
      // It may read the tenant's approvals, never resolve one.
      expect(Array.isArray(await agentClient.approvals.list())).toBe(true);
      expect(
        (
          (await agentClient.approvals
            .resolve('f'.repeat(64), { decision: 'allow' })
            .catch((e: unknown) => e)) as ToolgateError
        ).code,
      ).toBe('forbidden');
    } finally {
      await agentClient.close();
    }

    const badToken = await clientWith('not-a-real-token-000');
    try {
      expect(((await badToken.listTools().catch((e: unknown) => e)) as ToolgateError).code).toBe(
        'unauthorized',
      );
    } finally {
      await badToken.close();
    }

    // An input that does not match the ToolDef's schema does not compile.
    const wrongInput = () => {
      // @ts-expect-error name must be a string
      return client.dispatch({
        runId: 'r',
        callId: 'c',
        agent,
        tool: greet,
        input: { name: 42, times: 1 },
      });
    };
    void wrongInput;
  });
});

/** The event types of a `getDispatch` answer, in order (undefined when it has none). */
function recordedEventTypes(history: unknown): string[] | undefined {
  const events = (history as { events?: { event?: { type?: string } }[] }).events;
  return events?.map((e) => e.event?.type ?? '');
}
