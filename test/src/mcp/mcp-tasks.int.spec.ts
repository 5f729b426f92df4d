import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { eventually } from '@toolgate/testing';
import {
  countingTool,
  JOURNAL_WHILE_PARKED,
  resolve,
  unique,
  type CountingTool,
} from '../approvals/approval-helpers';
import { journalCounts, settled } from '../support/dispatch-probes';
import { serveHeldTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * MCP tasks at 2025-11-25 (the `tasks` capability), driven by the official v1 SDK client: a call
 * parked for approval is a task whose state is the journal's, collected after a person resolves it
 * in the approvals path, cancellable by its owner only, and served by any gateway replica.
 */
describe('MCP tasks on /mcp: 2025-11-25 (the v1 SDK client) and the 2026-07-28 extension', () => {
  let stack: TestStack;
  let gated: CountingTool;
  const open: { close(): Promise<void> }[] = [];

  /** A v1 client that declares task support for tools/call. */
  async function v1(token: string = TOKENS.acmeAgent, url = stack.all.gateway.url) {
    const client = new V1Client(
      { name: 'mcp-tasks-int', version: '1.0.0' },
      { capabilities: { tasks: { requests: { tools: { call: {} } } } } },
    );
    await client.connect(
      new V1Transport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    open.push(client);
    return client;
  }

  /** A task-augmented tools/call: the task it answers. */
  async function callAsTask(client: V1Client, n: string) {
    const created = await client.request(
      {
        method: 'tools/call',
        params: { name: 'gated_release', arguments: { n }, task: { ttl: 60_000 } },
      },
      CreateTaskResultSchema,
    );
    return created.task;
  }

  /** The task once the chain parked its call (`input_required`). */
  function parked(client: V1Client, taskId: string) {
    return eventually(
      async () => {
        const task = await client.experimental.tasks.getTask(taskId);
        return task.status === 'input_required' ? task : undefined;
      },
      { what: `task ${taskId} parked` },
    );
  }

  /** The approval key and dispatch a parked task's call waits on (from the approvals listing). */
  async function approvalOf(n: string) {
    return eventually(
      async () => {
        const res = await stack.http('GET', '/v1/approvals?status=pending', TOKENS.acmeApprover);
        const item = (res.body?.approvals ?? []).find((a: { inputPreview: { json: string } }) =>
          a.inputPreview.json.includes(n),
        );
        return item as { approvalKey: string; dispatchId: string; runId: string } | undefined;
      },
      { what: `the approval of ${n}` },
    );
  }

  async function mcpError(p: Promise<unknown>): Promise<McpError> {
    try {
      await p;
    } catch (err) {
      return err as McpError;
    }
    throw new Error('expected a JSON-RPC error');
  }

  beforeAll(async () => {
    stack = await startTestStack('mcptasks', {
      GATEWAY_MCP_STATE_KEY: 'mcp-tasks-test-state-key-0123456789abcdef',
      GATEWAY_MCP_APPROVAL_WAIT_MS: '2000',
    });
    gated = await countingTool(stack, 'gated_release');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: { ask: [{ id: 'gate-releases', tool: 'gated_release', reason: 'needs a person' }] },
      },
    });
    expect(put.status).toBe(200);
  });
  afterAll(async () => {
    for (const c of open) await c.close().catch(() => undefined);
    gated?.stop();
    await stack?.stop();
  });

  it('advertises tasks for tools/call and marks every tool task-capable', async () => {
    const client = await v1();
    expect(client.getServerCapabilities()?.tasks).toMatchObject({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'gated_release')?.execution).toEqual({
      taskSupport: 'optional',
    });
  });

  it('a parked call is a task: input_required until a person allows it, then tasks/result is the result; the tool ran once, after the resolution', async () => {
    const client = await v1();
    const n = unique('n');
    const task = await callAsTask(client, n);
    expect(task.taskId).toEqual(expect.any(String));
    expect(['working', 'input_required']).toContain(task.status);
    const waiting = await parked(client, task.taskId);
    expect(waiting.statusMessage).toContain('approval');
    expect(gated.runsOf(n)).toBe(0);

    const approval = await approvalOf(n);
    const allowed = await resolve(stack, approval.approvalKey, {
      decision: 'allow',
      dispatchId: approval.dispatchId,
      runId: approval.runId,
    });
    expect(allowed.status).toBe(200);
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      outcome: 'ok',
      dispatchId: approval.dispatchId,
      result: { ran: { n } },
    });
    expect(result._meta?.['io.modelcontextprotocol/related-task']).toEqual({
      taskId: task.taskId,
    });
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    // Collected twice, run once.
    await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(gated.runsOf(n)).toBe(1);
    const history = await settled(stack, approval.dispatchId);
    expect(history.events.map((e) => e.event.type)).toEqual([
      'requested',
      'decided',
      'suspended',
      'resolved',
      'started',
      'settled',
    ]);
  });

  it('a denied task fails: tasks/result is an error result with the reason; nothing ran', async () => {
    const client = await v1();
    const n = unique('n');
    const task = await callAsTask(client, n);
    await parked(client, task.taskId);
    const approval = await approvalOf(n);
    await resolve(stack, approval.approvalKey, {
      decision: 'deny',
      reason: 'not during the freeze',
      dispatchId: approval.dispatchId,
      runId: approval.runId,
    });
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('not during the freeze');
    expect(result.structuredContent).toMatchObject({ outcome: 'denied' });
    const after = await client.experimental.tasks.getTask(task.taskId);
    expect(after.status).toBe('failed');
    expect(after.statusMessage).toContain('not during the freeze');
    expect(gated.runsOf(n)).toBe(0);
  });

  it('tasks/cancel withdraws the parked call through the approvals path: cancelled, never run; a second cancel and a late approval are refused', async () => {
    const client = await v1();
    const n = unique('n');
    const task = await callAsTask(client, n);
    await parked(client, task.taskId);
    const approval = await approvalOf(n);
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    // The person who comes too late is told the call was already resolved (first one wins).
    const late = await resolve(stack, approval.approvalKey, {
      decision: 'allow',
      dispatchId: approval.dispatchId,
      runId: approval.runId,
    });
    expect(late.status).toBe(409);
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('withdrawn by the caller');
    const again = await mcpError(client.experimental.tasks.cancelTask(task.taskId));
    expect(again.code).toBe(-32602);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('cancelled');
    const history = await settled(stack, approval.dispatchId);
    expect(history.dispatch).toMatchObject({
      decision: 'deny',
      resolvedBy: 'acme-agent',
      outcome: 'denied',
    });
    expect(history.events.map((e) => e.event.type)).not.toContain('started');
    expect(gated.runsOf(n)).toBe(0);
  });

  it("another tenant's or identity's token, a forged id and an unknown id cannot get, collect or cancel a task (-32602 not-found); the task is untouched", async () => {
    const client = await v1();
    const n = unique('n');
    const task = await callAsTask(client, n);
    await parked(client, task.taskId);
    const approval = await approvalOf(n);
    const at = task.taskId.length - 2;
    const forged =
      task.taskId.slice(0, at) + (task.taskId[at] === 'A' ? 'B' : 'A') + task.taskId.slice(at + 1);
    const [, runId] = task.taskId.split('.');
    const attempts: [V1Client, string][] = [
      [await v1(TOKENS.globexAdmin), task.taskId],
      [await v1(TOKENS.acmeAdmin), task.taskId],
      [client, forged],
      [client, `tgt1.${runId}.${'0'.repeat(64)}.x`],
      [client, 'no-such-task'],
    ];
    for (const [who, id] of attempts) {
      for (const op of [
        () => who.experimental.tasks.getTask(id),
        () => who.experimental.tasks.getTaskResult(id, CallToolResultSchema),
        () => who.experimental.tasks.cancelTask(id),
      ]) {
        const refused = await mcpError(op());
        expect(refused.code).toBe(-32602);
        expect(refused.data).toMatchObject({ code: 'not-found' });
      }
    }
    // Another principal's listing does not show it either.
    const theirs = await (await v1(TOKENS.acmeAdmin)).experimental.tasks.listTasks();
    expect(theirs.tasks.map((t) => t.taskId)).not.toContain(task.taskId);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('input_required');
    expect(gated.runsOf(n)).toBe(0);
    expect(await journalCounts(stack, 'acme', approval.runId, approval.dispatchId)).toEqual(
      JOURNAL_WHILE_PARKED,
    );
  });

  it('a task is the journal’s: created on a replica that then stops, it is listed, read, allowed and collected on another', async () => {
    const { startGateway } = await import('@toolgate/gateway');
    const second = await startGateway({
      config: { ...stack.options.gateway, port: 0 },
      logger: false,
    });
    const there = await v1(TOKENS.acmeAgent, second.url);
    const n = unique('n');
    const task = await callAsTask(there, n);
    await parked(there, task.taskId);
    await there.close();
    await second.stop();

    const here = await v1();
    const listed = await eventually(
      async () => {
        const { tasks } = await here.experimental.tasks.listTasks();
        return tasks.find((t) => t.taskId === task.taskId);
      },
      { what: 'the task listed' },
    );
    expect(listed.status).toBe('input_required');
    expect((await here.experimental.tasks.getTask(task.taskId)).status).toBe('input_required');
    const approval = await approvalOf(n);
    await resolve(stack, approval.approvalKey, {
      decision: 'allow',
      dispatchId: approval.dispatchId,
      runId: approval.runId,
    });
    const result = await here.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.structuredContent).toMatchObject({ outcome: 'ok', result: { ran: { n } } });
    expect(gated.runsOf(n)).toBe(1);
  });

  it('a client that does not ask for a task still gets the error result naming the approval', async () => {
    const client = await v1();
    const n = unique('n');
    const result = await client.callTool({ name: 'gated_release', arguments: { n } });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ outcome: 'suspended' });
    expect(gated.runsOf(n)).toBe(0);
  });

  it('tasks/cancel of a running call stops it through the executor: the task is cancelled before its worker answered, its result the cancellation', async () => {
    const held = await serveHeldTool(stack, 'slow_task', { finished: true });
    try {
      const client = await v1();
      const created = await client.request(
        { method: 'tools/call', params: { name: 'slow_task', arguments: {}, task: {} } },
        CreateTaskResultSchema,
      );
      expect(created.task.status).toBe('working');
      const [, runId, dispatchId] = created.task.taskId.split('.');
      await eventually(
        async () => (await journalCounts(stack, 'acme', runId!, dispatchId!)).started,
        { what: 'the call started' },
      );
      const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
      expect(cancelled.status).toBe('cancelled');
      const result = await client.experimental.tasks.getTaskResult(
        created.task.taskId,
        CallToolResultSchema,
      );
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ error: { code: 'cancelled' } });
    } finally {
      held.release();
      held.stop();
    }
  });

  it('under separation of duties a submitter resolves none of its own calls: tasks/cancel of a parked one is refused (forbidden), and it stays parked', async () => {
    const policy = (document: Record<string, unknown>) =>
      stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document });
    const engine = { ask: [{ id: 'gate-releases', tool: 'gated_release' }] };
    expect((await policy({ engine, approvals: { separationOfDuties: true } })).status).toBe(200);
    try {
      const client = await v1();
      const n = unique('n');
      const task = await callAsTask(client, n);
      await parked(client, task.taskId);
      const refused = await mcpError(client.experimental.tasks.cancelTask(task.taskId));
      expect(refused.code).toBe(-32600);
      expect(refused.data).toMatchObject({ code: 'forbidden' });
      expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('input_required');
      expect(gated.runsOf(n)).toBe(0);
    } finally {
      expect((await policy({ engine })).status).toBe(200);
    }
  });

  describe('2026-07-28: the io.modelcontextprotocol/tasks extension', () => {
    const TASKS = 'io.modelcontextprotocol/tasks';

    /**
     * One 2026-07-28 request as a client of the tasks extension sends it (the SDK's v2 client has
     * no task runtime): the per-request envelope declares the extension, the standard headers
     * name the method and, for a call or a task, its name or task id.
     */
    async function rpc(
      method: string,
      params: Record<string, unknown>,
      options: { name?: string; token?: string; tasks?: boolean } = {},
    ): Promise<{ result?: any; error?: { code: number; message: string; data?: any } }> {
      const res = await fetch(`${stack.all.gateway.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${options.token ?? TOKENS.acmeAgent}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': method,
          ...(options.name ? { 'mcp-name': options.name } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientInfo': { name: 'tasks-raw', version: '1.0.0' },
              'io.modelcontextprotocol/clientCapabilities':
                options.tasks === false ? {} : { extensions: { [TASKS]: {} } },
            },
          },
        }),
      });
      const text = await res.text();
      const json = res.headers.get('content-type')?.includes('text/event-stream')
        ? text
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => JSON.parse(l.slice(5)))
            .find((m) => 'result' in m || 'error' in m)
        : JSON.parse(text);
      return json;
    }

    const getTask = (taskId: string, token?: string) =>
      rpc('tasks/get', { taskId }, { name: taskId, ...(token ? { token } : {}) });

    it('advertises the extension; a parked call answers a task (working, naming its approval) instead of input_required', async () => {
      const discover = await rpc('server/discover', {});
      expect(discover.result.capabilities.extensions).toMatchObject({ [TASKS]: {} });
      const n = unique('n');
      const created = await rpc(
        'tools/call',
        { name: 'gated_release', arguments: { n } },
        { name: 'gated_release' },
      );
      expect(created.result).toMatchObject({
        resultType: 'task',
        taskId: expect.any(String),
        status: 'working',
        ttlMs: null,
      });
      expect(created.result.statusMessage).toContain('approval');
      const taskId = created.result.taskId as string;
      const approval = await approvalOf(n);
      expect((await getTask(taskId)).result).toMatchObject({ taskId, status: 'working' });
      expect(gated.runsOf(n)).toBe(0);

      await resolve(stack, approval.approvalKey, {
        decision: 'allow',
        dispatchId: approval.dispatchId,
        runId: approval.runId,
      });
      const done = await eventually(
        async () => {
          const got = await getTask(taskId);
          return got.result?.status === 'completed' ? got.result : undefined;
        },
        { what: `task ${taskId} completed` },
      );
      expect(done.result.structuredContent).toMatchObject({
        outcome: 'ok',
        result: { ran: { n } },
      });
      expect(gated.runsOf(n)).toBe(1);
      // Without the extension declared, the same kind of call still pauses with input_required.
      const plain = await rpc(
        'tools/call',
        { name: 'gated_release', arguments: { n: unique('n') } },
        { name: 'gated_release', tasks: false },
      );
      expect(plain.result.resultType).toBe('input_required');
    });

    it('a denied task completes with the error result; tasks/cancel withdraws a parked one (never run); other principals and forged ids are refused', async () => {
      const denied = unique('n');
      const first = await rpc(
        'tools/call',
        { name: 'gated_release', arguments: { n: denied } },
        { name: 'gated_release' },
      );
      const deniedApproval = await approvalOf(denied);
      await resolve(stack, deniedApproval.approvalKey, {
        decision: 'deny',
        reason: 'not this week',
        dispatchId: deniedApproval.dispatchId,
        runId: deniedApproval.runId,
      });
      const refused = await eventually(
        async () => {
          const got = await getTask(first.result.taskId);
          return got.result?.status === 'completed' ? got.result : undefined;
        },
        { what: 'the denied task completed' },
      );
      expect(refused.result.isError).toBe(true);
      expect(JSON.stringify(refused.result.content)).toContain('not this week');

      const n = unique('n');
      const created = await rpc(
        'tools/call',
        { name: 'gated_release', arguments: { n } },
        { name: 'gated_release' },
      );
      const taskId = created.result.taskId as string;
      await approvalOf(n);
      const forged = taskId.slice(0, -1) + (taskId.endsWith('A') ? 'B' : 'A');
      for (const [id, token] of [
        [taskId, TOKENS.globexAdmin],
        [taskId, TOKENS.acmeAdmin],
        [forged, TOKENS.acmeAgent],
      ] as const) {
        for (const method of ['tasks/get', 'tasks/cancel']) {
          const answer = await rpc(method, { taskId: id }, { name: id, token });
          expect(answer.error).toMatchObject({ code: -32602, data: { code: 'not-found' } });
        }
      }
      expect((await getTask(taskId)).result.status).toBe('working');

      const cancelled = await rpc('tasks/cancel', { taskId }, { name: taskId });
      expect(cancelled.result).toMatchObject({ resultType: 'complete' });
      expect((await getTask(taskId)).result).toMatchObject({ status: 'cancelled' });
      expect(gated.runsOf(n)).toBe(0);
    });
  });
});
