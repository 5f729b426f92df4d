import { generateKeyPairSync } from 'node:crypto';
import { headers as natsHeaders, type Msg, type Subscription } from '@nats-io/transport-node';
import {
  ConfigError,
  ErrorCode,
  RemoteAuthHeader,
  signHookReply,
  spkiBase64,
} from '@toolgate/contracts';
import { PolicyStore } from '@toolgate/registry';
import { eventually, useTestNats, type TestNats } from '@toolgate/testing';
import { PolicyRuntime, type CallFacts } from './policy-runtime';
import type { RemoteHookRequest } from './remote-closures';
import { validateStoredPolicy } from './stored-policy';

const encoder = new TextEncoder();

function call(overrides: Partial<CallFacts> = {}): CallFacts {
  return {
    tool: { name: 'write_file', risk: 'write', needsApproval: false },
    input: { path: 'notes.txt', text: 'hi' },
    agent: { agentType: 'operator' },
    isolation: 'none',
    ...overrides,
  };
}

/** `{ modifiedInput: {a:{a:...}} }`, `levels` deep. */
function deeplyNested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return { modifiedInput: value };
}

describe('PolicyRuntime against a real PolicyStore and real NATS', () => {
  let t: TestNats;
  let store: PolicyStore;
  let runtime: PolicyRuntime;
  const subscriptions: Subscription[] = [];
  let tenants = 0;

  /** A tenant of this test's own with the given (validated) policy stored. */
  async function tenantWith(document: Record<string, unknown>): Promise<string> {
    const tenant = `tenant${++tenants}`;
    validateStoredPolicy(document);
    await store.put(tenant, document);
    return tenant;
  }

  /** A remote hook service on the bus that answers every request with `reply`. */
  async function serveHook(
    tenant: string,
    name: string,
    reply: (req: RemoteHookRequest) => unknown,
  ): Promise<RemoteHookRequest[]> {
    const seen: RemoteHookRequest[] = [];
    subscriptions.push(
      t.nc.subscribe(t.subjects.hook(tenant, name), {
        callback: (_err, msg) => {
          const req = msg.json<RemoteHookRequest>();
          seen.push(req);
          const answer = reply(req);
          if (answer !== undefined)
            msg.respond(
              typeof answer === 'string'
                ? encoder.encode(answer)
                : encoder.encode(JSON.stringify(answer)),
            );
        },
      }),
    );
    await t.nc.flush();
    return seen;
  }

  beforeAll(async () => {
    t = await useTestNats('policyrt');
    store = await PolicyStore.open(t.nc, t.subjects);
    runtime = new PolicyRuntime(store, t.nc, t.subjects);
  });
  afterAll(async () => {
    for (const sub of subscriptions) sub.unsubscribe();
    store?.stop();
    await t?.cleanup();
  });

  it('with no policy stored, allows at revision 0 and asks when the tool needs approval', async () => {
    expect(await runtime.decide('empty', call())).toMatchObject({
      decision: { verdict: 'allow' },
      revision: 0,
      separationOfDuties: false,
    });
    const asked = await runtime.decide(
      'empty',
      call({ tool: { name: 'write_file', risk: 'write', needsApproval: true } }),
    );
    expect(asked.decision.verdict).toBe('ask');
  });

  it('records the revision each decision was reached under, and a new put takes effect on the next decision', async () => {
    const tenant = await tenantWith({});
    const before = await runtime.decide(tenant, call());
    expect(before.decision.verdict).toBe('allow');
    expect(before.revision).toBe(store.get(tenant).revision);

    const revision = await store.put(tenant, {
      engine: { deny: [{ tool: 'write_file', reason: 'read-only week' }] },
    });
    const after = await runtime.decide(tenant, call());
    expect(after).toMatchObject({
      revision,
      decision: { verdict: 'deny', reason: 'read-only week' },
    });
    expect(revision).toBeGreaterThan(before.revision);
  });

  it('an unknown profile throws (the caller fails closed)', async () => {
    const tenant = await tenantWith({ profiles: { ops: {} } });
    await expect(runtime.decide(tenant, call({ profile: 'nope' }))).rejects.toBeInstanceOf(
      ConfigError,
    );
    expect((await runtime.decide(tenant, call({ profile: 'ops' }))).decision.verdict).toBe('allow');
  });

  it('a stored document that no longer parses denies with a config error until it is replaced', async () => {
    const tenant = 'broken';
    await store.put(tenant, { engine: { deny: 'everything' } });
    await expect(runtime.decide(tenant, call())).rejects.toMatchObject({ code: ErrorCode.Config });
    await expect(runtime.decide(tenant, call())).rejects.toMatchObject({ code: ErrorCode.Config });
    await store.put(tenant, {});
    expect((await runtime.decide(tenant, call())).decision.verdict).toBe('allow');
  });

  it('applies separation of duties per profile, the profile setting winning over the document one', async () => {
    const tenant = await tenantWith({
      profiles: { ops: {}, dev: {}, ci: {} },
      approvals: { separationOfDuties: true, profiles: { dev: { separationOfDuties: false } } },
    });
    expect((await runtime.decide(tenant, call())).separationOfDuties).toBe(true);
    expect((await runtime.decide(tenant, call({ profile: 'ops' }))).separationOfDuties).toBe(true);
    expect((await runtime.decide(tenant, call({ profile: 'dev' }))).separationOfDuties).toBe(false);

    const off = await tenantWith({
      profiles: { ci: {} },
      approvals: { profiles: { ci: { separationOfDuties: true } } },
    });
    expect((await runtime.decide(off, call())).separationOfDuties).toBe(false);
    expect((await runtime.decide(off, call({ profile: 'ci' }))).separationOfDuties).toBe(true);
  });

  describe('remote hooks over NATS', () => {
    it('a hook answering { verdict: "deny" } denies, and receives the call', async () => {
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'guard', unauthenticated: true }] } },
      });
      const seen = await serveHook(tenant, 'guard', () => ({ verdict: 'deny' }));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toContain('remote:guard');
      expect(seen).toEqual([
        expect.objectContaining({
          kind: 'hook',
          tenant,
          toolName: 'write_file',
          input: call().input,
        }),
      ]);
    });

    it('a hook answering { modifiedInput } substitutes the input the rest of the chain and execute see', async () => {
      const tenant = await tenantWith({
        engine: {
          expressions: [
            { when: 'input.path == "/etc/passwd"', effect: 'deny', reason: 'no system files' },
          ],
        },
        remote: { engine: { hooks: [{ name: 'rewrite', unauthenticated: true }] } },
      });
      await serveHook(tenant, 'rewrite', (req) => ({
        modifiedInput: { ...(req.input as object), path: 'safe/notes.txt' },
      }));
      const { decision } = await runtime.decide(
        tenant,
        call({ input: { path: '/etc/passwd', text: 'x' } }),
      );
      expect(decision.verdict).toBe('allow');
      expect(decision.input).toEqual({ path: 'safe/notes.txt', text: 'x' });
    });

    it('a hook answering {} passes the call on to the rest of the chain', async () => {
      const tenant = await tenantWith({
        engine: { ask: [{ tool: 'write_file', reason: 'writes need a look' }] },
        remote: { engine: { hooks: [{ name: 'pass', unauthenticated: true }] } },
      });
      const seen = await serveHook(tenant, 'pass', () => ({}));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'ask', reason: 'writes need a look' });
      expect(seen).toHaveLength(1);
    });

    it('a remote canUseTool answering ask is taken as deny', async () => {
      const tenant = await tenantWith({
        remote: { engine: { canUseTool: { name: 'gate', unauthenticated: true } } },
      });
      const seen = await serveHook(tenant, 'gate', () => ({ verdict: 'ask' }));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision.verdict).toBe('deny');
      expect(seen[0]?.kind).toBe('canUseTool');
    });

    it('with no responder, denies and keeps the reason', async () => {
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'absent', unauthenticated: true }] } },
      });
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toMatch(/remote:absent' failed, so the call is denied: .+/);
    });

    it('with a responder that never answers, denies on the hook deadline and keeps the reason', async () => {
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'slow', timeoutMs: 50, unauthenticated: true }] } },
      });
      const seen = await serveHook(tenant, 'slow', () => undefined);
      const { decision } = await runtime.decide(tenant, call());
      // The request was sent: on a loaded machine it can reach the silent responder after the
      // 50 ms deadline has already denied the call (a CI run read `seen` empty).
      await eventually(() => (seen.length ? true : undefined), { what: 'the hook request' });
      expect(seen).toHaveLength(1);
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toMatch(/remote:slow' failed, so the call is denied: .+/);
    });

    it.each([
      ['not JSON', 'this is not json'],
      ['an array', [1, 2]],
      ['an unexpected verdict', { verdict: 'maybe' }],
      ['a modified input nested 3,000 levels deep', deeplyNested(3000)],
    ])('a reply that is %s denies and keeps the reason', async (_what, reply) => {
      const name = `odd${tenants}`;
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name, unauthenticated: true }] } },
      });
      await serveHook(tenant, name, () => reply);
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toMatch(
        new RegExp(`remote:${name}' failed, so the call is denied: .+`),
      );
    });

    it.each([
      ['hook', { decision: 'deny' }, 'decision'],
      ['hook', { verdict: 'allow', note: 'looks fine' }, 'note'],
      ['canUseTool', { verdict: 'allow', Reason: 'ok' }, 'Reason'],
    ])(
      'a %s reply with a field the protocol does not declare (%j) denies, naming the field',
      async (kind, reply, field) => {
        const name = `strict${tenants}`;
        const remote =
          kind === 'hook'
            ? { hooks: [{ name, unauthenticated: true }] }
            : { canUseTool: { name, unauthenticated: true } };
        // Without the hook this call is allowed: a reply read as a pass would let it through.
        const tenant = await tenantWith({ remote: { engine: remote } });
        const seen = await serveHook(tenant, name, () => reply);
        const { decision } = await runtime.decide(tenant, call());
        expect(seen).toHaveLength(1);
        expect(decision).toMatchObject({ verdict: 'deny', decidedBy: kind });
        expect(decision.reason).toContain('malformed reply');
        expect(decision.reason).toContain(`"${field}"`);
      },
    );

    it('hooks on a profile run for that profile only', async () => {
      const tenant = await tenantWith({
        profiles: { ops: {}, dev: {} },
        remote: { profiles: { ops: { hooks: [{ name: 'opsguard', unauthenticated: true }] } } },
      });
      const seen = await serveHook(tenant, 'opsguard', () => ({ verdict: 'deny' }));
      expect((await runtime.decide(tenant, call({ profile: 'dev' }))).decision.verdict).toBe(
        'allow',
      );
      expect(seen).toHaveLength(0);
      expect((await runtime.decide(tenant, call({ profile: 'ops' }))).decision.verdict).toBe(
        'deny',
      );
    });
  });

  describe('signed hooks on an open broker', () => {
    const hookKeys = generateKeyPairSync('ed25519');
    const publicKey = spkiBase64(hookKeys.publicKey);

    /**
     * The real hook (signs with its key) and, when `forge` is given, a forger on the same subject
     * (a plain subscriber, as anyone on an open broker can be) that answers FIRST: the real hook
     * replies only once the forger's reply has gone out.
     */
    async function hookAndForger(
      tenant: string,
      name: string,
      real: (req: RemoteHookRequest) => object | undefined,
      forge?: (msg: Msg) => { body: object; signature?: string },
    ): Promise<{ captured: { body: Uint8Array; signature: string }[] }> {
      const captured: { body: Uint8Array; signature: string }[] = [];
      const forged = new Map<string, Promise<void>>();
      const subject = t.subjects.hook(tenant, name);
      if (forge) {
        subscriptions.push(
          t.nc.subscribe(subject, {
            callback: (_err, msg) => {
              const { body, signature } = forge(msg);
              const h = natsHeaders();
              if (signature) h.set(RemoteAuthHeader.HookSignature, signature);
              msg.respond(encoder.encode(JSON.stringify(body)), { headers: h });
              forged.set(msg.reply!, t.nc.flush());
            },
          }),
        );
      }
      subscriptions.push(
        t.nc.subscribe(subject, {
          queue: subject,
          callback: (_err, msg) => {
            void (async () => {
              const answer = real(msg.json<RemoteHookRequest>());
              if (answer === undefined) return;
              // Let the forger win the race to the inbox.
              while (forge && !forged.has(msg.reply!)) await new Promise((r) => setTimeout(r, 5));
              await forged.get(msg.reply!);
              const body = encoder.encode(JSON.stringify(answer));
              const nonce = msg.headers?.get(RemoteAuthHeader.HookNonce) ?? '';
              const signature = signHookReply(hookKeys.privateKey, nonce, msg.data, body);
              captured.push({ body, signature });
              const h = natsHeaders();
              h.set(RemoteAuthHeader.HookSignature, signature);
              msg.respond(body, { headers: h });
            })();
          },
        }),
      );
      await t.nc.flush();
      return { captured };
    }

    it('a second responder answering allow first cannot answer for the hook: all 8 calls are denied by the real hook', async () => {
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'guard', publicKey, timeoutMs: 5000 }] } },
      });
      await hookAndForger(
        tenant,
        'guard',
        () => ({ verdict: 'deny', reason: 'the real hook says no' }),
        () => ({ body: { verdict: 'allow' } }),
      );
      const decisions = await Promise.all(
        Array.from({ length: 8 }, () => runtime.decide(tenant, call())),
      );
      for (const { decision } of decisions) {
        expect(decision).toMatchObject({
          verdict: 'deny',
          decidedBy: 'hook',
          reason: "permission hook 'remote:guard' returned deny: the real hook says no",
        });
      }
    });

    it('a forger signing with its own key is ignored too, and alone it denies with the reason', async () => {
      const forgerKey = generateKeyPairSync('ed25519').privateKey;
      const forge = (msg: Msg) => {
        const body = { verdict: 'allow' };
        const nonce = msg.headers?.get(RemoteAuthHeader.HookNonce) ?? '';
        const bytes = encoder.encode(JSON.stringify(body));
        return { body, signature: signHookReply(forgerKey, nonce, msg.data, bytes) };
      };
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'guard', publicKey, timeoutMs: 5000 }] } },
      });
      await hookAndForger(tenant, 'guard', () => ({ verdict: 'deny' }), forge);
      expect((await runtime.decide(tenant, call())).decision.verdict).toBe('deny');

      // The call waits the deadline out (the real hook never answers); the forger's reply must come
      // within it to be counted as ignored: 2 s, not 300 ms, so a loaded run still sees it.
      const alone = await tenantWith({
        remote: { engine: { hooks: [{ name: 'alone', publicKey, timeoutMs: 2000 }] } },
      });
      await hookAndForger(alone, 'alone', () => undefined, forge);
      const { decision } = await runtime.decide(alone, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toContain('no reply signed with its publicKey');
      expect(decision.reason).toContain('1 unsigned, mis-signed or replayed ignored');
    });

    it("a replayed reply (the real hook's signed allow to an earlier request) does not allow a later call", async () => {
      // The first call needs the real hook's allow within the deadline: 2 s, not 300 ms, so a
      // loaded run still sees it (the second call waits the deadline out).
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'guard', publicKey, timeoutMs: 2000 }] } },
      });
      let allowOnce = true;
      let captured: { body: Uint8Array; signature: string }[] = [];
      ({ captured } = await hookAndForger(
        tenant,
        'guard',
        () => {
          const answer = allowOnce ? { verdict: 'allow' } : undefined;
          allowOnce = false;
          return answer;
        },
        (msg) => {
          // The first request: the attacker has nothing to replay yet and answers garbage.
          const old = captured[0];
          if (!old) return { body: {} };
          void msg;
          return { body: JSON.parse(new TextDecoder().decode(old.body)), signature: old.signature };
        },
      ));
      expect((await runtime.decide(tenant, call())).decision.verdict).toBe('allow');
      expect(captured).toHaveLength(1);
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toContain('1 unsigned, mis-signed or replayed ignored');
    });

    it('a hook stored with neither publicKey nor unauthenticated (before this check) denies', async () => {
      const tenant = `tenant${++tenants}`;
      await store.put(tenant, { remote: { engine: { hooks: [{ name: 'old' }] } } });
      await serveHook(tenant, 'old', () => ({ verdict: 'allow' }));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toContain('no valid publicKey');
    });
  });

  describe('checkFetchHost', () => {
    it('deny and ask domain rules refuse the connection; other hosts pass', async () => {
      const tenant = await tenantWith({
        engine: { deny: [{ domains: ['evil.example'] }], ask: [{ domains: ['*.review.example'] }] },
      });
      expect(runtime.checkFetchHost(tenant, undefined, 'evil.example')).toBe('deny');
      expect(runtime.checkFetchHost(tenant, undefined, 'api.review.example')).toBe('deny');
      expect(runtime.checkFetchHost(tenant, undefined, 'docs.example')).toBe('allow');
    });

    it('a domain rule for another tool does not refuse the fetch tool', async () => {
      const tenant = await tenantWith({
        engine: { deny: [{ tool: 'send_mail', domains: ['mail.example'] }] },
      });
      expect(runtime.checkFetchHost(tenant, undefined, 'mail.example')).toBe('allow');
    });

    it('a domain rule for the fetch tool by name refuses', async () => {
      const tenant = await tenantWith({
        engine: { deny: [{ tool: 'http_fetch', domains: ['mail.example'] }] },
      });
      expect(runtime.checkFetchHost(tenant, undefined, 'mail.example')).toBe('deny');
    });

    it('checks a networked subprocess tool by its own name and risk', async () => {
      const tenant = await tenantWith({
        engine: {
          deny: [
            { tool: 'gh_search', domains: ['api.github.com'] },
            { risk: 'network', domains: ['evil.example'] },
          ],
        },
      });
      const tool = { name: 'gh_search', risk: 'network' as const };
      expect(runtime.checkFetchHost(tenant, undefined, 'api.github.com', tool)).toBe('deny');
      expect(runtime.checkFetchHost(tenant, undefined, 'evil.example', tool)).toBe('deny');
      expect(runtime.checkFetchHost(tenant, undefined, 'docs.example', tool)).toBe('allow');
      // The rule scoped to gh_search does not refuse http_fetch.
      expect(runtime.checkFetchHost(tenant, undefined, 'api.github.com')).toBe('allow');
    });

    it('uses the profile chain, and an unknown profile denies', async () => {
      const tenant = await tenantWith({ profiles: { web: { deny: [{ domains: ['*'] }] } } });
      expect(runtime.checkFetchHost(tenant, undefined, 'docs.example')).toBe('allow');
      expect(runtime.checkFetchHost(tenant, 'web', 'docs.example')).toBe('deny');
      expect(runtime.checkFetchHost(tenant, 'nope', 'docs.example')).toBe('deny');
    });
  });
});
