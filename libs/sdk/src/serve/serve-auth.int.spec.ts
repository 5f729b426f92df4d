import { generateKeyPairSync } from 'node:crypto';
import { headers as natsHeaders, type Msg } from '@nats-io/transport-node';
import {
  ErrorCode,
  RemoteAuthHeader,
  signToolRequest,
  spkiBase64,
  verifyHookReply,
  type RemoteToolRequest,
} from '@toolgate/contracts';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { tool } from '@toolgate/tools';
import { z } from 'zod';
import { serveHook } from './serve-hook';
import { serveTool } from './serve-tool';

const encoder = new TextEncoder();
const executor = generateKeyPairSync('ed25519');

describe('serveTool and serveHook authenticate on an open broker', () => {
  let t: TestNats;
  let runs = 0;
  const greet = tool({
    name: 'auth_greet',
    description: 'greets',
    parameters: z.object({ name: z.string() }),
    execute: ({ name }) => {
      runs++;
      return `hi ${name}`;
    },
  });
  const request = (): RemoteToolRequest => ({
    dispatchId: 'd'.repeat(64),
    tenant: 'acme',
    runId: 'run-1',
    toolName: greet.contract.name,
    contractHash: greet.contractHash,
    input: { name: 'ada' },
    agent: { agentType: 'tester' },
    isolation: 'none',
    deadlineMs: 5000,
  });

  beforeAll(async () => {
    t = await useTestNats('sdk-auth');
  });
  afterAll(async () => {
    await t.cleanup();
  });

  async function send(payload: Uint8Array, h?: Record<string, string>): Promise<unknown> {
    const headers = natsHeaders();
    for (const [k, v] of Object.entries(h ?? {})) headers.set(k, v);
    const sub = t.subjects.remoteTool('acme', greet.contract.name).subject;
    return (await t.nc.request(sub, payload, { timeout: 5000, headers })).json();
  }

  it('a worker with the executor public key runs a signed request once and refuses forged, foreign-key and replayed ones', async () => {
    const served = serveTool(t.nc, t.subjects, 'acme', greet, {
      executorPublicKey: spkiBase64(executor.publicKey),
    });
    try {
      await t.nc.flush();
      const sub = t.subjects.remoteTool('acme', greet.contract.name).subject;
      const payload = encoder.encode(JSON.stringify(request()));
      const signed = signToolRequest(executor.privateKey, sub, payload, Date.now());
      expect(await send(payload, signed)).toEqual({ ok: true, result: 'hi ada' });
      expect(runs).toBe(1);

      const forger = generateKeyPairSync('ed25519').privateKey;
      const refusals = [
        await send(payload),
        await send(payload, signToolRequest(forger, sub, payload, Date.now())),
        await send(payload, signed), // the captured request, replayed
        await send(
          encoder.encode(JSON.stringify({ ...request(), input: { name: 'eve' } })),
          signed,
        ),
        await send(
          payload,
          signToolRequest(executor.privateKey, sub, payload, Date.now() - 3_600_000),
        ),
      ];
      for (const r of refusals) {
        expect(r).toMatchObject({ ok: false, error: { code: ErrorCode.Unauthorized } });
      }
      expect(runs).toBe(1);
    } finally {
      await served.stop();
    }
  });

  it('a hook with a signing key signs (nonce, request digest, reply) and carries its reason', async () => {
    const hook = generateKeyPairSync('ed25519');
    const served = serveHook(
      t.nc,
      t.subjects,
      'acme',
      'auth-guard',
      () => ({
        verdict: 'deny',
        reason: 'x'.repeat(2000),
      }),
      { signingKey: hook.privateKey },
    );
    try {
      await t.nc.flush();
      const payload = encoder.encode(
        JSON.stringify({
          kind: 'hook',
          tenant: 'acme',
          toolName: 'write_file',
          input: {},
          context: { tool: { name: 'write_file', needsApproval: false } },
        }),
      );
      const headers = natsHeaders();
      headers.set(RemoteAuthHeader.HookNonce, 'nonce-1');
      const reply: Msg = await t.nc.request(served.subject, payload, { timeout: 5000, headers });
      const sig = reply.headers?.get(RemoteAuthHeader.HookSignature);
      expect(verifyHookReply(hook.publicKey, 'nonce-1', payload, reply.data, sig)).toBe(true);
      expect(verifyHookReply(hook.publicKey, 'nonce-2', payload, reply.data, sig)).toBe(false);
      const body = reply.json<{ verdict: string; reason: string }>();
      expect(body.verdict).toBe('deny');
      expect(body.reason).toHaveLength(500);
    } finally {
      await served.stop();
    }
  });
});
