import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCli } from '@toolgate/cli';
import { ApiOperation, type PolicyWhatIfReport, type RemoteHookRequest } from '@toolgate/contracts';
import { headers as natsHeaders, type Subscription } from '@nats-io/transport-node';
import { eventually } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const encoder = new TextEncoder();

/**
 * Policy what-if against the whole stack: calls recorded by the real services are replayed through
 * a candidate policy over HTTP (JSON and streamed NDJSON), over NATS, and by the CLI.
 */
describe('policy what-if over the recorded journal', () => {
  let stack: TestStack;
  let hook: Subscription;
  const hookCalls: RemoteHookRequest[] = [];
  let dispatches: Record<string, string>;

  const dispatch = async (runId: string, callId: string, tool: string, input: unknown) => {
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAdmin, {
      runId,
      callId,
      agent: { agentType: 'coder' },
      tool,
      input,
    });
    expect(res.status).toBe(202);
    return res.body.dispatchId as string;
  };

  beforeAll(async () => {
    stack = await startTestStack('whatif');
    // The recorded policy: shell asks; a remote hook denies fetches to paste sites.
    hook = stack.nats.nc.subscribe(stack.nats.subjects.hook('acme', 'egress'), {
      callback: (_err, msg) => {
        const req = msg.json<RemoteHookRequest>();
        hookCalls.push(req);
        const url = (req.input as { url?: string }).url ?? '';
        msg.respond(
          encoder.encode(JSON.stringify(url.includes('paste') ? { verdict: 'deny' } : {})),
        );
      },
    });
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: { ask: [{ tool: 'shell' }] },
        remote: { engine: { hooks: [{ name: 'egress', unauthenticated: true }] } },
      },
    });
    expect(put.status).toBe(200);
    dispatches = {
      list: await dispatch('r1', 'c1', 'list_dir', { path: '.' }),
      write: await dispatch('r1', 'c2', 'write_file', { path: 'notes.txt', content: 'x' }),
      shell: await dispatch('r2', 'c3', 'shell', { command: 'rm -rf build' }),
      paste: await dispatch('r2', 'c4', 'http_fetch', { url: 'http://paste.example/raw' }),
    };
    for (const id of [dispatches.list!, dispatches.write!, dispatches.paste!])
      await settled(stack, id);
    // The shell call is parked (suspended): decided all the same.
    await eventually(async () => {
      const run = await stack.http('GET', '/v1/runs/r2', TOKENS.acmeAdmin);
      return run.body?.pending?.length === 1 ? true : undefined;
    });
    const globex = await stack.http('POST', '/v1/dispatches', TOKENS.globexAdmin, {
      runId: 'g1',
      callId: 'c1',
      agent: { agentType: 'coder' },
      tool: 'write_file',
      input: { path: 'g.txt', content: 'x' },
    });
    await eventually(async () => {
      const d = await stack.http(
        'GET',
        `/v1/dispatches/${globex.body.dispatchId}`,
        TOKENS.globexAdmin,
      );
      return d.body?.dispatch?.status === 'settled' ? true : undefined;
    });
  });
  afterAll(async () => {
    hook?.unsubscribe();
    await stack.stop();
  });

  const candidate = {
    engine: {
      deny: [
        { tool: 'write_file', reason: 'writes are frozen' },
        { tool: 'shell', argv: 'rm **' },
      ],
    },
    remote: { engine: { hooks: [{ name: 'egress', unauthenticated: true }] } },
  };

  it('reports every call whose verdict the candidate changes, with the rule on each side', async () => {
    const callsBefore = hookCalls.length;
    const revision = (await stack.http('GET', '/v1/policy', TOKENS.acmeAdmin)).body.revision;
    const res = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, { candidate });
    expect(res.status).toBe(200);
    const report = res.body as PolicyWhatIfReport;
    expect(report).toMatchObject({
      calls: 4,
      changed: 2,
      unchanged: 2,
      skipped: { undecided: 0, errorCap: 0 },
      // The paste fetch's deny came from the hook: given again, not asked again.
      hooks: { reused: 1, unknown: 0 },
      byChange: expect.arrayContaining([
        { from: 'allow', to: 'deny', count: 1 },
        { from: 'ask', to: 'deny', count: 1 },
      ]),
      truncated: false,
    });
    expect(report.byTool).toEqual(
      expect.arrayContaining([
        { tool: 'write_file', calls: 1, changed: 1 },
        { tool: 'list_dir', calls: 1, changed: 0 },
      ]),
    );
    const byTool = Object.fromEntries(report.changes.map((c) => [c.tool, c]));
    expect(byTool.write_file).toMatchObject({
      dispatchId: dispatches.write,
      runId: 'r1',
      callId: 'c2',
      before: { verdict: 'allow', decidedBy: 'default', policyRevision: revision },
      after: {
        verdict: 'deny',
        decidedBy: 'deny-rule',
        rule: { source: 'engine', tool: 'write_file' },
        reason: 'writes are frozen',
      },
    });
    expect(byTool.shell).toMatchObject({
      dispatchId: dispatches.shell,
      before: { verdict: 'ask', decidedBy: 'ask-rule', rule: { tool: 'shell' } },
      after: { verdict: 'deny', rule: { argv: 'rm **' } },
    });
    // Nothing was stored, and the hook was not asked anything during the replay.
    expect((await stack.http('GET', '/v1/policy', TOKENS.acmeAdmin)).body.revision).toBe(revision);
    expect(hookCalls.length).toBe(callsBefore);
  });

  it('filters by run and by time, and never shows another tenant its calls', async () => {
    const r2 = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {
      candidate,
      runId: 'r2',
    });
    expect(r2.body).toMatchObject({ calls: 2, changed: 1, window: { runId: 'r2' } });
    const future = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {
      candidate,
      since: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(future.body).toMatchObject({ calls: 0, changed: 0 });
    const globex = await stack.http('POST', '/v1/policy/whatif', TOKENS.globexAdmin, { candidate });
    expect(globex.body).toMatchObject({ calls: 1, changed: 1 });
    expect(globex.body.changes[0]).toMatchObject({ runId: 'g1', tool: 'write_file' });
  });

  it('streams progress and then the report as NDJSON', async () => {
    const res = await fetch(`${stack.all.gateway.url}/v1/policy/whatif`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKENS.acmeAdmin}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      body: JSON.stringify({ candidate }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    // Messages read: 4 requested, 4 decided and the 3 settled (the error streaks are replayed).
    expect(lines[0]).toEqual({ progress: { done: 0, total: 11 } });
    expect(lines.at(-2)).toEqual({ progress: { done: 11, total: 11 } });
    expect(lines.at(-1)!.report).toMatchObject({ calls: 4, changed: 2 });
  });

  it('refuses without admin, a bad body and a candidate a put would refuse, journaling nothing', async () => {
    const agent = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAgent, { candidate });
    expect(agent.status).toBe(403);
    expect(agent.body.error.code).toBe('forbidden');
    const noCandidate = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {});
    expect(noCandidate.status).toBe(400);
    expect(noCandidate.body.error).toMatchObject({ code: 'invalid-request' });
    expect(noCandidate.body.error.message).toContain('candidate');
    const badRule = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {
      candidate: { engine: { deny: [{ tool: 'shell', argv: '' }] } },
    });
    expect(badRule.status).toBe(422);
    expect(badRule.body.error.code).toBe('config');
    const streamedRefusal = await fetch(`${stack.all.gateway.url}/v1/policy/whatif`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKENS.acmeAgent}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      body: JSON.stringify({ candidate }),
    });
    expect(streamedRefusal.status).toBe(403);
    expect(((await streamedRefusal.json()) as { error: { code: string } }).error.code).toBe(
      'forbidden',
    );
  });

  it('answers the same over NATS (policy.whatif)', async () => {
    const h = natsHeaders();
    h.set('Authorization', `Bearer ${TOKENS.acmeAdmin}`);
    const reply = await stack.nats.nc.request(
      stack.nats.subjects.api(ApiOperation.WhatIfPolicy),
      encoder.encode(JSON.stringify({ candidate, runId: 'r1' })),
      { headers: h, timeout: 10_000 },
    );
    expect(reply.json()).toMatchObject({ ok: true, data: { calls: 2, changed: 1 } });
  });

  it('the CLI prints the report, as a table or JSON, and feeds a progress bar', async () => {
    const file = path.join(stack.workdir, 'candidate.json');
    await writeFile(file, JSON.stringify(candidate));
    const updates: [number, number][] = [];
    let stopped = false;
    const cli = async (argv: string[]) => {
      let stdout = '';
      let stderr = '';
      const code = await runCli(argv, {
        env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: TOKENS.acmeAdmin },
        stdout: { write: (t: string) => (stdout += t) },
        stderr: { write: (t: string) => (stderr += t) },
        progress: async () => ({
          update: (done, total) => void updates.push([done, total]),
          stop: () => void (stopped = true),
        }),
      });
      return { code, stdout, stderr };
    };
    const json = await cli(['policy', 'whatif', '--candidate', file, '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout)).toMatchObject({ calls: 4, changed: 2 });
    expect(updates.at(-1)).toEqual([11, 11]);
    expect(stopped).toBe(true);

    const human = await cli([
      'policy',
      'whatif',
      '--candidate',
      file,
      '--since',
      '1h',
      '--run',
      'r1',
    ]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^what-if over 2 recorded calls/);
    expect(human.stdout).toMatch(/^ {2}1 would change verdict, 1 would not/m);
    expect(human.stdout).toContain('remote hooks and canUseTool were not called');
    expect(human.stdout).toMatch(/^allow\s+deny\s+1$/m);
    expect(human.stdout).toMatch(/before: allow by default \(policy revision \d+\)/);
    expect(human.stdout).toContain('after:  deny by deny-rule');
    expect(human.stdout).toContain('writes are frozen');

    const refused = await cli(['policy', 'whatif', '--candidate', file, '--since', 'yesterday']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--since must be a duration/);
    const missing = await cli([
      'policy',
      'whatif',
      '--candidate',
      path.join(stack.workdir, 'nope'),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error: cannot read /);
  });
});
