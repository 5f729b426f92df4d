import {
  ConfigError,
  ErrorCode,
  TOOL_VIEW_MAX_BYTES,
  TOOLSET_MAX_BYTES,
  type RegisteredTool,
} from '@toolgate/contracts';
import { Kvm } from '@nats-io/kv';
import { toolgateRejection, useTestNats, type TestNats } from '@toolgate/testing';
import { ToolRegistry } from './tool-registry';

const readFile: RegisteredTool = {
  name: 'read_file',
  description: 'Reads a file in the working directory.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  policy: { risk: 'read', needsApproval: false, executor: 'inprocess' },
};

function remoteTool(name: string, overrides: Partial<RegisteredTool> = {}): RegisteredTool {
  return {
    name,
    description: `The ${name} tool.`,
    parameters: { type: 'object', properties: { q: { type: 'string' } } },
    policy: { needsApproval: false, executor: 'remote' },
    ...overrides,
  };
}

describe('ToolRegistry on a real KV bucket', () => {
  let t: TestNats;
  let registry: ToolRegistry;

  beforeAll(async () => {
    t = await useTestNats('registry');
    registry = await ToolRegistry.open(t.nc, t.subjects);
    await registry.announce([readFile], ['inprocess', 'remote']);
  });
  afterAll(async () => {
    registry?.stop();
    await t?.cleanup();
  });

  it('announced builtins resolve for every tenant, marked builtin', () => {
    for (const tenant of ['acme', 'globex']) {
      expect(registry.resolve(tenant, 'read_file')).toMatchObject({
        name: 'read_file',
        builtin: true,
        contractHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    }
    expect(registry.list('acme').tools.map((tool) => tool.name)).toContain('read_file');
  });

  it('announcing the same builtins again is a no-op', async () => {
    const kv = await new Kvm(t.nc).open(t.subjects.toolsBucket);
    const revisions = async () =>
      Promise.all(
        ['_builtin.read_file', '_served.inprocess', '_served.remote'].map(
          async (key) => (await kv.get(key))?.revision,
        ),
      );
    const before = registry.list('acme').toolsetHash;
    const written = await revisions();
    expect(written).not.toContain(undefined);
    await registry.announce([readFile], ['inprocess', 'remote']);
    expect(registry.list('acme').toolsetHash).toBe(before);
    // Nothing was written again.
    expect(await revisions()).toEqual(written);
  });

  it('a registered tool resolves and is listed for its tenant only', async () => {
    const { warnings, ...view } = await registry.register('acme', remoteTool('search_issues'));
    expect(warnings).toEqual([]);
    expect(view).toMatchObject({
      name: 'search_issues',
      builtin: false,
      policy: { executor: 'remote' },
    });
    expect(registry.resolve('acme', 'search_issues')).toEqual(view);
    expect(registry.list('acme').tools.map((tool) => tool.name)).toEqual([
      'read_file',
      'search_issues',
    ]);

    expect(registry.resolve('globex', 'search_issues')).toBeUndefined();
    expect(registry.list('globex').tools.map((tool) => tool.name)).toEqual(['read_file']);
  });

  it('resolveFresh finds what another replica registered before this mirror has it', async () => {
    // A replica whose mirror stopped following the bucket: the worst case of a watch still behind.
    const lagging = await ToolRegistry.open(t.nc, t.subjects);
    lagging.stop();
    try {
      await registry.register('acme', remoteTool('just_registered'));
      const builtin = { ...readFile, name: 'just_announced' };
      await registry.announce([builtin], ['inprocess']);
      expect(lagging.resolve('acme', 'just_registered')).toBeUndefined();
      expect(await lagging.resolveFresh('acme', 'just_registered')).toEqual(
        registry.resolve('acme', 'just_registered'),
      );
      expect(await lagging.resolveFresh('globex', 'just_announced')).toMatchObject({
        name: 'just_announced',
        builtin: true,
      });
      // Another tenant's tool and a name nobody registered stay unknown.
      expect(await lagging.resolveFresh('globex', 'just_registered')).toBeUndefined();
      expect(await lagging.resolveFresh('acme', 'never_registered')).toBeUndefined();
    } finally {
      lagging.stop();
    }
  });

  it('a tenant whose name extends another tenant name does not see its tools', async () => {
    await registry.register('acme', remoteTool('acme_only'));
    expect(registry.resolve('acme2', 'acme_only')).toBeUndefined();
    expect(registry.list('acme2').tools.map((tool) => tool.name)).not.toContain('acme_only');
  });

  it('a builtin name cannot be registered', async () => {
    const err = await toolgateRejection(registry.register('acme', { ...remoteTool('read_file') }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.details).toEqual({ tool: 'read_file' });
    expect(registry.resolve('acme', 'read_file')?.builtin).toBe(true);
  });

  it('refuses an inprocess tool with executor-unregistered', async () => {
    const err = await toolgateRejection(
      registry.register(
        'acme',
        remoteTool('local_thing', { policy: { needsApproval: false, executor: 'inprocess' } }),
      ),
    );
    expect(err.code).toBe(ErrorCode.ExecutorUnregistered);
    expect(err.message).toContain('remote');
    expect(registry.resolve('acme', 'local_thing')).toBeUndefined();
  });

  it('refuses a tool whose executor no tool-executor serves with executor-unregistered', async () => {
    const err = await toolgateRejection(
      registry.register(
        'acme',
        remoteTool('boxed', {
          policy: {
            needsApproval: false,
            executor: 'container',
            command: { argv: ['/bin/true'] },
            container: { image: 'busybox' },
          },
        }),
      ),
    );
    expect(err.code).toBe(ErrorCode.ExecutorUnregistered);
    expect(err.details).toEqual({ tool: 'boxed', executor: 'container' });
  });

  it('an executor announced later becomes registrable', async () => {
    const boxed = remoteTool('contained', {
      policy: {
        needsApproval: false,
        executor: 'container',
        command: { argv: ['/bin/true'] },
        container: { image: 'busybox' },
      },
    });
    expect((await toolgateRejection(registry.register('acme', boxed))).code).toBe(
      ErrorCode.ExecutorUnregistered,
    );
    await registry.announce([], ['container']);
    expect((await registry.register('acme', boxed)).policy.executor).toBe('container');
  });

  it('refuses a schema outside the supported subset with a ConfigError', async () => {
    const err = await toolgateRejection(
      registry.register(
        'acme',
        remoteTool('bad_schema', {
          parameters: { type: 'object', properties: { q: { type: 'text' } } },
        }),
      ),
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(registry.resolve('acme', 'bad_schema')).toBeUndefined();
  });

  it('refuses the reserved tenants, which would otherwise plant builtins or served executors', async () => {
    for (const tenant of ['_builtin', '_served', '_contract']) {
      expect((await toolgateRejection(registry.register(tenant, remoteTool('planted')))).code).toBe(
        ErrorCode.Config,
      );
    }
    expect(registry.resolve('globex', 'planted')).toBeUndefined();
  });

  it("bounds a tool and a tenant's toolset in bytes, so every listing fits one broker message", async () => {
    const wide = (properties: number) => ({
      type: 'object' as const,
      properties: Object.fromEntries(
        Array.from({ length: properties }, (_, i) => [
          `p${i}`,
          { type: 'string', description: 'x'.repeat(4_000) },
        ]),
      ),
    });
    const tooBig = await toolgateRejection(
      registry.register('bigco', remoteTool('huge', { parameters: wide(20) })),
    );
    expect(tooBig).toMatchObject({
      code: ErrorCode.TooLarge,
      details: { tool: 'huge', limitBytes: TOOL_VIEW_MAX_BYTES },
    });
    let registered = 0;
    let refused: unknown;
    for (let i = 0; i < 12 && !refused; i++) {
      await registry.register('bigco', remoteTool(`t${i}`, { parameters: wide(15) })).then(
        () => registered++,
        (err: unknown) => (refused = err),
      );
    }
    expect(refused).toMatchObject({
      code: ErrorCode.TooLarge,
      details: { limitBytes: TOOLSET_MAX_BYTES },
    });
    expect(registered).toBeGreaterThan(4);
    expect(Buffer.byteLength(JSON.stringify(registry.list('bigco')))).toBeLessThanOrEqual(
      TOOLSET_MAX_BYTES + 1_024,
    );
    // A registered tool replaced by one of its size still fits (it is counted once).
    await registry.register(
      'bigco',
      remoteTool('t0', { parameters: wide(15), description: 'New.' }),
    );
  });

  it('toolsetHash changes with a description and not with a policy', async () => {
    await registry.register('hashco', remoteTool('lookup'));
    const base = registry.list('hashco').toolsetHash;

    await registry.register(
      'hashco',
      remoteTool('lookup', {
        policy: { needsApproval: true, executor: 'remote', risk: 'network', timeoutMs: 10 },
      }),
    );
    expect(registry.resolve('hashco', 'lookup')?.policy.needsApproval).toBe(true);
    expect(registry.list('hashco').toolsetHash).toBe(base);

    await registry.register(
      'hashco',
      remoteTool('lookup', { description: 'Looks things up, carefully.' }),
    );
    expect(registry.list('hashco').toolsetHash).not.toBe(base);
  });

  it('answers a registration with the warnings of its schema: accepted, probably a mistake', async () => {
    const reply = await registry.register(
      'acme',
      remoteTool('typo', {
        parameters: { type: 'object', properties: { q: { type: 'string', maxlength: 3 } } },
      }),
    );
    expect(reply.warnings).toEqual(['unknown keyword: "maxlength"']);
    expect((await registry.register('acme', remoteTool('clean'))).warnings).toEqual([]);
  });

  it('keeps every registered contract by its hash, so a re-registration does not lose the old one', async () => {
    const v1 = await registry.register('acme', remoteTool('evolving'));
    const v2 = await registry.register(
      'acme',
      remoteTool('evolving', {
        parameters: { type: 'object', properties: { q: { type: 'integer' } }, required: ['q'] },
      }),
    );
    expect(v2.contractHash).not.toBe(v1.contractHash);
    expect(registry.resolve('acme', 'evolving')?.contractHash).toBe(v2.contractHash);
    expect(await registry.contract(v1.contractHash)).toEqual({
      name: 'evolving',
      description: 'The evolving tool.',
      parameters: remoteTool('evolving').parameters,
    });
    expect((await registry.contract(v2.contractHash))?.parameters).toMatchObject({
      required: ['q'],
    });
    expect(await registry.contract('0'.repeat(64))).toBeUndefined();
    expect(await registry.contract('not a hash')).toBeUndefined();
  });

  it('does not trust a planted contract whose content does not match its hash', async () => {
    const v = await registry.register('acme', remoteTool('planted_target'));
    const kv = await new Kvm(t.nc).open(t.subjects.toolsBucket);
    await kv.put(
      `_contract.${v.contractHash}`,
      JSON.stringify({ name: 'planted_target', description: 'x', parameters: { type: 'object' } }),
    );
    expect(await registry.contract(v.contractHash)).toBeUndefined();
  });

  describe('subprocess tools', () => {
    const echo = (overrides: Partial<RegisteredTool['policy']> = {}): RegisteredTool => ({
      name: 'echo_name',
      description: 'Echoes a name.',
      parameters: {
        type: 'object',
        properties: { name: { type: 'string' }, note: { type: 'string' } },
        required: ['name'],
      },
      policy: {
        needsApproval: false,
        executor: 'subprocess',
        command: { argv: ['/bin/echo', { input: 'name' }] },
        ...overrides,
      },
    });

    beforeAll(() => registry.announce([], ['subprocess']));

    it('registers one with a command whose placeholders are required parameters', async () => {
      const view = await registry.register('acme', echo());
      expect(view.policy.command?.argv).toEqual(['/bin/echo', { input: 'name' }]);
    });

    it('refuses a subprocess tool without a command, and a command on another executor', async () => {
      for (const tool of [
        echo({ command: undefined }),
        { ...echo(), policy: { ...echo().policy, executor: 'remote' as const } },
      ]) {
        const err = await toolgateRejection(
          registry.register('acme', { ...tool, name: 'no_command' }),
        );
        expect(err.code).toBe(ErrorCode.Config);
        expect(err.details).toEqual({ tool: 'no_command', field: 'policy.command' });
      }
      expect(registry.resolve('acme', 'no_command')).toBeUndefined();
    });

    it('refuses a placeholder for an optional or unknown parameter', async () => {
      for (const input of ['note', 'nope']) {
        const err = await toolgateRejection(
          registry.register('acme', echo({ command: { argv: ['/bin/echo', { input }] } })),
        );
        expect(err.message).toContain(`placeholder ${input}`);
      }
    });

    it('refuses declared network hosts without risk network', async () => {
      const command = { argv: ['/usr/bin/curl'], network: { hosts: ['example.com'] } };
      expect((await toolgateRejection(registry.register('acme', echo({ command })))).code).toBe(
        ErrorCode.Config,
      );
      const view = await registry.register('acme', {
        ...echo({ command, risk: 'network' }),
        name: 'fetcher',
      });
      expect(view.policy.command?.network).toEqual({ hosts: ['example.com'] });
    });

    it('current() finds the version a call was decided on, even before the mirror has it', async () => {
      const registered = await registry.register('acme', echo());
      expect((await registry.current('acme', 'echo_name', registered.contractHash))?.name).toBe(
        'echo_name',
      );
      expect(await registry.current('acme', 'echo_name', '0'.repeat(64))).toBeUndefined();
      expect(await registry.current('acme', 'missing', registered.contractHash)).toBeUndefined();

      // Another replica's mirror has not seen a new registration yet: it reads the bucket.
      const stale = await ToolRegistry.open(t.nc, t.subjects);
      try {
        stale.stop();
        const changed = await registry.register('acme', {
          ...echo(),
          description: 'Echoes a name, changed.',
        });
        expect(stale.resolve('acme', 'echo_name')?.contractHash).toBe(registered.contractHash);
        expect((await stale.current('acme', 'echo_name', changed.contractHash))?.description).toBe(
          'Echoes a name, changed.',
        );
      } finally {
        stale.stop();
      }
    });
  });

  describe('container tools', () => {
    const lint = (overrides: Partial<RegisteredTool['policy']> = {}): RegisteredTool => ({
      name: 'lint_ctr',
      description: 'Lints in a container.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      policy: {
        needsApproval: false,
        executor: 'container',
        command: { argv: ['/usr/bin/lint', { input: 'path' }] },
        container: { image: 'tools/lint:1', cpus: 0.5 },
        ...overrides,
      },
    });

    beforeAll(() => registry.announce([], ['container']));

    it('registers one with an image and a command', async () => {
      const view = await registry.register('acme', lint());
      expect(view.policy.container).toEqual({ image: 'tools/lint:1', cpus: 0.5 });
    });

    it('refuses a container tool without an image or a command, and an image on another executor', async () => {
      const cases: [RegisteredTool, string][] = [
        [lint({ container: undefined }), 'policy.container'],
        [lint({ command: undefined }), 'policy.command'],
        [
          { ...lint(), policy: { ...lint().policy, executor: 'remote' as const } },
          'policy.container',
        ],
      ];
      for (const [tool, field] of cases) {
        const err = await toolgateRejection(
          registry.register('acme', { ...tool, name: 'bad_ctr' }),
        );
        expect(err.code).toBe(ErrorCode.Config);
        expect(err.details).toEqual({ tool: 'bad_ctr', field });
      }
      expect(registry.resolve('acme', 'bad_ctr')).toBeUndefined();
    });
  });

  it('a second registry on the same bucket sees registrations', async () => {
    const other = await ToolRegistry.open(t.nc, t.subjects);
    try {
      expect(other.resolve('acme', 'search_issues')?.name).toBe('search_issues');
      expect(other.list('acme').toolsetHash).toBe(registry.list('acme').toolsetHash);
    } finally {
      other.stop();
    }
  });
});
