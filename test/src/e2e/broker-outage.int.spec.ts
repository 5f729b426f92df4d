import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { eventually, startNatsServer, type NatsServerProcess } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const agent = { agentType: 'coder' };

/**
 * The gateway while its broker is down: every operation that needs the broker answers
 * 503 `unavailable` (retryable), never a 500; nothing refused was journaled; /readyz is 503 until
 * every one of the gateway's connections is back (its KV mirrors' own too), and once it is 200 the
 * same calls go through.
 * Runs on a nats-server of its own, which it kills and restarts.
 */
describe('the HTTP API while the broker is down', () => {
  let server: NatsServerProcess;
  let stack: TestStack;

  beforeAll(async () => {
    server = await startNatsServer();
    // Nothing here waits on an approval's timeout: the journal sweeps at its default pace.
    stack = await startTestStack('outage', {
      NATS_URL: server.url,
      JOURNAL_SWEEP_INTERVAL_MS: '1000',
    });
  }, 60_000);
  afterAll(async () => {
    if (!server.running) await server.start().catch(() => undefined);
    await stack?.stop();
    await server?.cleanup();
  }, 60_000);

  const submit = (callId: string) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'outage',
      callId,
      agent,
      tool: 'list_dir',
      input: { path: '.' },
      wait: 15_000,
    });
  const putPolicy = () =>
    stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: { engine: {} } });

  it('answers 503 unavailable on submit, policy put, register and reads, and recovers', async () => {
    const before = await submit('before');
    expect(before.body.settled).toMatchObject({ outcome: 'ok' });

    await server.kill();
    const refused = {
      submit: await submit('during'),
      policy: await putPolicy(),
      register: await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
        tool: {
          name: 'during_outage',
          description: 'Registered while the broker is down.',
          parameters: { type: 'object' },
          policy: { executor: 'remote' },
        },
      }),
      run: await stack.http('GET', '/v1/runs/outage', TOKENS.acmeAgent),
    };
    const notReady = await stack.http('GET', '/readyz', undefined);
    expect(notReady).toEqual({
      status: 503,
      body: { ready: false, checks: { nats: false, 'nats-kv': false, 'journal-streams': false } },
    });
    for (const [what, res] of Object.entries(refused)) {
      expect({ what, status: res.status, code: res.body?.error?.code }).toEqual({
        what,
        status: 503,
        code: 'unavailable',
      });
    }

    await server.start();
    // Nothing refused was journaled: the run holds the first call's events only.
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const { subjects } = stack.nats;
      const info = await jsm.streams.info(subjects.journal.stream, {
        subjects_filter: subjects.journal.forRun('acme', 'outage'),
      });
      const keys = new Set(Object.keys(info.state.subjects ?? {}).map((s) => s.split('.')[4]));
      expect([...keys]).toEqual([before.body.dispatchId]);
    } finally {
      await nc.close();
    }

    // Ready again only once both connections are back: a policy write then goes through at once
    // (on a replica still reconnecting its KV connection it would time out, 503 after 5 s).
    const ready = await eventually(
      async () => {
        const res = await stack.http('GET', '/readyz', undefined);
        return res.status === 200 ? res : undefined;
      },
      { what: 'the gateway ready after the broker restarted', timeoutMs: 30_000 },
    );
    expect(ready.body.checks).toEqual({ nats: true, 'nats-kv': true, 'journal-streams': true });
    expect((await putPolicy()).status).toBe(200);
    // The other services reconnect on their own time; the submission goes through once they have.
    const again = await eventually(
      async () => {
        const res = await submit('during');
        return res.status < 500 ? res : undefined;
      },
      { what: 'a submission accepted after the broker restarted', timeoutMs: 30_000 },
    );
    expect(again.body.settled).toMatchObject({ outcome: 'ok' });
  }, 120_000);
});
