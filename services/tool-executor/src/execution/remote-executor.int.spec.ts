import { connect } from '@nats-io/transport-node';
import { generateKeyPairSync } from 'node:crypto';
import { InboxRequests } from '@toolgate/bus';
import { createSubjects, ErrorCode, type RemoteToolRequest } from '@toolgate/contracts';
import { startNatsServer, useTestNats, type TestNats } from '@toolgate/testing';
import { runRemoteTool } from './remote-executor';

const encoder = new TextEncoder();
const key = generateKeyPairSync('ed25519').privateKey;

describe('runRemoteTool against workers on a real NATS server', () => {
  let t: TestNats;
  let requests: InboxRequests;
  // An answered call gets a deadline no loaded run reaches (the deep reply is 400 kB to build, send
  // and parse); the silent worker's case passes its own short one.
  const call = (toolName: string, deadlineMs = 10_000): RemoteToolRequest => ({
    dispatchId: 'd'.repeat(64),
    tenant: 'acme',
    runId: 'run-1',
    toolName,
    contractHash: 'c'.repeat(64),
    input: { n: 1 },
    agent: { agentType: 'tester' },
    isolation: 'none',
    cwd: '/tmp',
    deadlineMs,
  });
  const serve = (toolName: string, answer: (data: Uint8Array) => string | undefined) => {
    const { subject, queue } = t.subjects.remoteTool('acme', toolName);
    t.nc.subscribe(subject, {
      queue,
      callback: (_err, msg) => {
        const reply = answer(msg.data);
        if (reply !== undefined) msg.respond(encoder.encode(reply));
      },
    });
  };

  beforeAll(async () => {
    t = await useTestNats('remote-exec');
    requests = new InboxRequests(t.nc);
    serve('echo', (data) =>
      JSON.stringify({ ok: true, result: JSON.parse(new TextDecoder().decode(data)).input }),
    );
    serve('fails', () =>
      JSON.stringify({ ok: false, error: { code: 'tool-failed', message: 'nope' } }),
    );
    serve('garbled', () => 'not json');
    serve('deep', () => `{"ok":true,"result":${'['.repeat(200_000)}${']'.repeat(200_000)}}`);
    serve('silent', () => undefined);
    await t.nc.flush();
  });
  afterAll(async () => {
    requests.close();
    await t.cleanup();
  });

  it('returns what the worker answers, success or typed failure', async () => {
    expect(await runRemoteTool(requests, t.subjects, call('echo'), key)).toEqual({
      ok: true,
      result: { n: 1 },
    });
    expect(await runRemoteTool(requests, t.subjects, call('fails'), key)).toEqual({
      ok: false,
      error: { code: 'tool-failed', message: 'nope' },
    });
  });

  it('throws a transient unavailable error when no worker received the call', async () => {
    const err = await runRemoteTool(requests, t.subjects, call('nobody'), key).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({
      code: ErrorCode.Unavailable,
      message: 'no worker is serving nobody',
      retryable: true,
    });
  });

  it('turns a silent worker and a garbled reply into typed outcomes', async () => {
    expect(await runRemoteTool(requests, t.subjects, call('silent', 150), key)).toMatchObject({
      ok: false,
      error: { code: ErrorCode.Timeout },
    });
    expect(await runRemoteTool(requests, t.subjects, call('garbled'), key)).toMatchObject({
      ok: false,
      error: { code: ErrorCode.NonSerializableResult },
    });
    // Journaled, a result this deep would stop the projection (PostgreSQL refuses to parse it).
    expect(await runRemoteTool(requests, t.subjects, call('deep'), key)).toMatchObject({
      ok: false,
      error: { code: ErrorCode.NonSerializableResult, message: expect.stringMatching(/deeper/) },
    });
  });
});

describe('runRemoteTool while the broker is away', () => {
  it('throws a transient unavailable error for a call it could not send: the tool did not start', async () => {
    const broker = await startNatsServer({ jetstream: false });
    const nc = await connect({ servers: broker.url, maxReconnectAttempts: -1 });
    const requests = new InboxRequests(nc);
    try {
      const disconnected = (async () => {
        for await (const s of nc.status()) if (s.type === 'disconnect') return;
      })();
      await broker.kill();
      await disconnected;
      const err = await runRemoteTool(
        requests,
        createSubjects('tbroker'),
        {
          dispatchId: 'd'.repeat(64),
          tenant: 'acme',
          runId: 'run-1',
          toolName: 'echo',
          contractHash: 'c'.repeat(64),
          input: {},
          agent: { agentType: 'tester' },
          isolation: 'none',
          cwd: '/tmp',
          deadlineMs: 60_000,
        },
        key,
      ).catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: ErrorCode.Unavailable,
        message: 'the broker is unreachable: the call to echo was not sent',
        retryable: true,
      });
    } finally {
      requests.close();
      await nc.close();
      await broker.cleanup();
    }
  });
});
