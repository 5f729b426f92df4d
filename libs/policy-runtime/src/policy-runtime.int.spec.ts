import type { Subscription } from '@nats-io/transport-node';
import { ConfigError, ErrorCode } from '@toolgate/contracts';
import { PolicyStore } from '@toolgate/registry';
import { useTestNats, type TestNats } from '@toolgate/testing';
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
      const tenant = await tenantWith({ remote: { engine: { hooks: [{ name: 'guard' }] } } });
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
        remote: { engine: { hooks: [{ name: 'rewrite' }] } },
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
        remote: { engine: { hooks: [{ name: 'pass' }] } },
      });
      const seen = await serveHook(tenant, 'pass', () => ({}));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'ask', reason: 'writes need a look' });
      expect(seen).toHaveLength(1);
    });

    it('a remote canUseTool answering ask is taken as deny', async () => {
      const tenant = await tenantWith({ remote: { engine: { canUseTool: { name: 'gate' } } } });
      const seen = await serveHook(tenant, 'gate', () => ({ verdict: 'ask' }));
      const { decision } = await runtime.decide(tenant, call());
      expect(decision.verdict).toBe('deny');
      expect(seen[0]?.kind).toBe('canUseTool');
    });

    it('with no responder, denies and keeps the reason', async () => {
      const tenant = await tenantWith({ remote: { engine: { hooks: [{ name: 'absent' }] } } });
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toMatch(/remote:absent' failed, so the call is denied: .+/);
    });

    it('with a responder that never answers, denies on the hook deadline and keeps the reason', async () => {
      const tenant = await tenantWith({
        remote: { engine: { hooks: [{ name: 'slow', timeoutMs: 50 }] } },
      });
      const seen = await serveHook(tenant, 'slow', () => undefined);
      const { decision } = await runtime.decide(tenant, call());
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
      const tenant = await tenantWith({ remote: { engine: { hooks: [{ name }] } } });
      await serveHook(tenant, name, () => reply);
      const { decision } = await runtime.decide(tenant, call());
      expect(decision).toMatchObject({ verdict: 'deny', decidedBy: 'hook' });
      expect(decision.reason).toMatch(
        new RegExp(`remote:${name}' failed, so the call is denied: .+`),
      );
    });

    it('hooks on a profile run for that profile only', async () => {
      const tenant = await tenantWith({
        profiles: { ops: {}, dev: {} },
        remote: { profiles: { ops: { hooks: [{ name: 'opsguard' }] } } },
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
