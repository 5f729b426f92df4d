import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BROKER_SHAPES, eventually, startTestBroker, type TestBroker } from '@toolgate/testing';
import { runWhere } from '../support/dispatch-probes';
import { serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

const call = dispatchRequests('run-1', 'e2e', 10_000);

/**
 * On one node with R1 streams and on a 3-node cluster with R3 streams: the replays, re-keys and the
 * retry bound below rest on reads of the journal that a lagging replica could answer stale.
 */
describe.each(BROKER_SHAPES)(
  'dispatch pipeline end to end (gateway → evaluator → executor → journal) on $shape',
  (shape) => {
    let broker: TestBroker;
    let stack: TestStack;

    beforeAll(async () => {
      broker = await startTestBroker(shape, 'pipeline');
      stack = await startTestStack('pipeline', {}, broker);
      await writeFile(path.join(stack.workdir, 'hello.txt'), 'hello, toolgate\n');
    }, 120_000);
    afterAll(async () => {
      await stack?.stop();
      await broker?.cleanup();
    }, 60_000);

    it('lists the builtins with a toolset hash', async () => {
      const res = await stack.http('GET', '/v1/tools', TOKENS.acmeAgent);
      expect(res.status).toBe(200);
      expect(res.body.tools.map((t: { name: string }) => t.name)).toEqual(
        expect.arrayContaining([
          'read_file',
          'list_dir',
          'grep',
          'write_file',
          'shell',
          'http_fetch',
        ]),
      );
      expect(res.body.toolsetHash).toMatch(/^[0-9a-f]{64}$/);
    });

    it('allows, executes and settles a call, and serves its history', async () => {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('read_file', { path: 'hello.txt' }),
      );
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        status: 'accepted',
        state: 'settled',
        settled: { outcome: 'ok' },
      });
      expect(JSON.stringify(res.body.settled.result)).toContain('hello, toolgate');
      const history = await eventually(async () => {
        const h = await stack.http(
          'GET',
          `/v1/dispatches/${res.body.dispatchId}`,
          TOKENS.acmeAgent,
        );
        return h.status === 200 && h.body.events.length >= 4 ? h.body : undefined;
      });
      expect(history.events.map((e: { event: { type: string } }) => e.event.type)).toEqual([
        'requested',
        'decided',
        'started',
        'settled',
      ]);
    });

    it('denies by policy and the reason reaches the caller', async () => {
      const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: { engine: { deny: [{ tool: 'write_file', reason: 'writes are frozen today' }] } },
      });
      expect(put.status).toBe(200);
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('write_file', { path: 'x.txt', content: 'x' }),
      );
      expect(res.body.settled).toMatchObject({
        outcome: 'denied',
        error: { code: 'denied', message: expect.stringContaining('writes are frozen today') },
      });
    });

    it('parks an ask and reports the run as suspended with the open approval', async () => {
      await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: { engine: { ask: [{ tool: 'shell' }] } },
      });
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('shell', { command: 'echo hi' }, { runId: 'run-ask' }),
      );
      expect(res.status).toBe(202);
      expect(res.body.state).toBe('suspended');
      const run = await runWhere(stack, 'run-ask', (r) => r.status === 'suspended');
      expect(run.pending).toHaveLength(1);
      expect(run.pending[0]).toMatchObject({ tool: 'shell' });
    });

    it('settles invalid arguments as an error tool result naming the issues', async () => {
      await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('read_file', { path: 42 }),
      );
      expect(res.body.settled).toMatchObject({
        outcome: 'error',
        error: { code: 'invalid-arguments' },
      });
      expect(res.body.settled.error.details.issues[0].path).toEqual(['path']);
    });

    it('refuses an unknown tool with a typed error and journals nothing', async () => {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('no_such_tool', {}),
      );
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('unknown-tool');
      const info = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
        subjects_filter: '>',
      });
      expect(Object.keys(info.state.subjects ?? {}).some((s) => s.includes('no_such_tool'))).toBe(
        false,
      );
    });

    it('refuses malformed requests and bad tokens with typed errors', async () => {
      expect(
        (await stack.http('POST', '/v1/dispatches', undefined, call('read_file', {}))).body.error
          .code,
      ).toBe('unauthorized');
      expect(
        (
          await stack.http(
            'POST',
            '/v1/dispatches',
            'wrong-token-wrong-token',
            call('read_file', {}),
          )
        ).body.error.code,
      ).toBe('unauthorized');
      const bad = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'a.b',
        tool: 'read_file',
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid-request');
      const notJson = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, '{not json');
      expect(notJson.status).toBe(400);
      expect(notJson.body.error.code).toBe('invalid-request');
      const forbidden = await stack.http('PUT', '/v1/policy', TOKENS.acmeAgent, { document: {} });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.error.code).toBe('forbidden');
    });

    it('runs a remote tool on a worker, replays the same call without running it again, and re-keys on a contract change', async () => {
      let runs = 0;
      const tool = {
        name: 'greet',
        description: 'Greets someone.',
        parameters: {
          type: 'object',
          properties: { name: { type: 'string' } },
          required: ['name'],
        },
        policy: { executor: 'remote', risk: 'read' },
      };
      // Registered with a 201, or serveRemoteTool throws.
      const worker = await serveRemoteTool(stack, tool, (input) => {
        runs++;
        return { ok: true, result: { greeting: `hello ${(input as { name: string }).name}` } };
      });
      const first = call('greet', { name: 'ada' });
      const a = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, first);
      expect(a.body).toMatchObject({
        status: 'accepted',
        settled: { outcome: 'ok', result: { greeting: 'hello ada' } },
      });
      const b = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, first);
      expect(b.body).toMatchObject({
        status: 'replayed',
        dispatchId: a.body.dispatchId,
        settled: { result: { greeting: 'hello ada' } },
      });
      expect(runs).toBe(1);

      await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
        tool: { ...tool, description: 'Greets someone warmly.' },
      });
      const c = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, first);
      expect(c.body.status).toBe('accepted');
      expect(c.body.dispatchId).not.toBe(a.body.dispatchId);
      expect(runs).toBe(2);
      worker.stop();
    });

    it('keeps tenants apart', async () => {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('read_file', { path: 'hello.txt' }),
      );
      // Once the owner can read it (the projection has it), the other tenant still cannot.
      await eventually(async () => {
        const own = await stack.http(
          'GET',
          `/v1/dispatches/${res.body.dispatchId}`,
          TOKENS.acmeAgent,
        );
        return own.status === 200 ? true : undefined;
      });
      const other = await stack.http(
        'GET',
        `/v1/dispatches/${res.body.dispatchId}`,
        TOKENS.globexAdmin,
      );
      expect(other.status).toBe(404);
      // A run is found like a dispatch: the owner sees it, the other tenant gets the same 404 as
      // for a run nobody has.
      const run = (token: string, id: string) => stack.http('GET', `/v1/runs/${id}`, token);
      expect((await run(TOKENS.acmeAgent, 'run-1')).status).toBe(200);
      expect((await run(TOKENS.globexAdmin, 'run-1')).status).toBe(404);
      expect((await run(TOKENS.acmeAgent, 'no-such-run')).body).toMatchObject({
        error: { code: 'not-found' },
      });
      const tools = await stack.http('GET', '/v1/tools', TOKENS.globexAdmin);
      expect(tools.body.tools.map((t: { name: string }) => t.name)).not.toContain('greet');
    });

    it('refuses to register a tool whose executor nothing serves', async () => {
      // A complete container tool: the only thing wrong is that no executor here runs containers.
      const res = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
        tool: {
          name: 'sandboxed',
          description: 'Runs in a container.',
          parameters: { type: 'object' },
          policy: {
            executor: 'container',
            command: { argv: ['/bin/true'] },
            container: { image: 'tools/busybox:1' },
          },
        },
      });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('executor-unregistered');
    });

    it('bounds model retries to two per call chain', async () => {
      const worker = await serveRemoteTool(
        stack,
        {
          name: 'picky',
          description: 'Asks for another try.',
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        },
        () => ({ ok: false, error: { code: 'model-retry', message: 'use plain keywords' } }),
      );
      let previous: string | undefined;
      for (let attempt = 0; attempt < 3; attempt++) {
        const res = await stack.http(
          'POST',
          '/v1/dispatches',
          TOKENS.acmeAgent,
          call('picky', { q: `try ${attempt}` }, previous ? { retryOf: previous } : {}),
        );
        expect(res.body.settled).toMatchObject({
          outcome: 'error',
          error: { code: 'model-retry', message: 'use plain keywords' },
        });
        previous = res.body.dispatchId;
      }
      const exhausted = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call('picky', { q: 'try 3' }, { retryOf: previous }),
      );
      expect(exhausted.status).toBe(422);
      expect(exhausted.body.error).toMatchObject({ code: 'model-retry', details: { depth: 3 } });
      worker.stop();
    });
  },
);
