import { Kvm } from '@nats-io/kv';
import {
  canonicalJson,
  contractHash,
  ErrorCode,
  scriptVersion,
  sha256Hex,
  type RegisteredTool,
} from '@toolgate/contracts';
import { toolgateRejection, useTestNats, type TestNats } from '@toolgate/testing';
import { ToolRegistry, type ScriptToolRecord } from './tool-registry';

function script(name: string, body = 'return 1;'): ScriptToolRecord {
  const source = `// @tool ${name}\n// @description The ${name} script.\n${body}`;
  const sha = sha256Hex(canonicalJson({ source, sidecar: null }));
  const tool: RegisteredTool = {
    name,
    description: `The ${name} script.`,
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    version: scriptVersion(sha),
    policy: { risk: 'read', needsApproval: false, executor: 'script' },
  };
  return { tool, source };
}

describe('script tools in the registry (real KV bucket)', () => {
  let t: TestNats;
  let registry: ToolRegistry;

  beforeAll(async () => {
    t = await useTestNats('registry-scripts');
    registry = await ToolRegistry.open(t.nc, t.subjects);
    await registry.announce(
      [
        {
          name: 'read_file',
          description: 'Reads a file.',
          parameters: { type: 'object', properties: {} },
          policy: { risk: 'read', needsApproval: false, executor: 'inprocess' },
        },
      ],
      ['inprocess', 'remote', 'script'],
    );
  });
  afterAll(async () => {
    registry?.stop();
    await t?.cleanup();
  });

  it('installs a tenant’s script: it resolves for that tenant only, its files and contract by hash', async () => {
    const upper = script('upper');
    const installed = await registry.installScript('acme', upper, { overwrite: false });
    expect(installed.replaced).toBeUndefined();
    const hash = contractHash(upper.tool);
    expect(registry.resolve('acme', 'upper')).toMatchObject({ contractHash: hash, builtin: false });
    expect(registry.resolve('globex', 'upper')).toBeUndefined();
    expect(await registry.contract(hash)).toEqual({
      name: 'upper',
      description: upper.tool.description,
      parameters: upper.tool.parameters,
      version: upper.tool.version,
    });
    const sha = upper.tool.version!.slice('script:'.length);
    expect(await registry.scriptFiles(sha)).toEqual({ source: upper.source });
    expect(registry.scripts('acme').map((s) => s.name)).toEqual(['upper']);
  });

  it('refuses to replace a tool without overwrite, and replaces it with overwrite', async () => {
    await registry.installScript('acme', script('twice'), { overwrite: false });
    const again = await toolgateRejection(
      registry.installScript('acme', script('twice', 'return 2;'), { overwrite: false }),
    );
    expect(again).toMatchObject({ code: ErrorCode.Conflict, details: { reason: 'exists' } });
    const v2 = script('twice', 'return 2;');
    const replaced = await registry.installScript('acme', v2, { overwrite: true });
    expect(replaced.replaced).toBe(contractHash(script('twice').tool));
    expect(registry.resolve('acme', 'twice')?.contractHash).toBe(contractHash(v2.tool));
  });

  it('undo puts back what was there before', async () => {
    const v1 = script('undone');
    await registry.installScript('acme', v1, { overwrite: false });
    const v2 = await registry.installScript('acme', script('undone', 'return 2;'), {
      overwrite: true,
    });
    await v2.undo();
    const kv = await new Kvm(t.nc).open(t.subjects.toolsBucket);
    const entry = await kv.get('acme.undone');
    expect(entry?.json<{ contractHash: string }>().contractHash).toBe(contractHash(v1.tool));
    const fresh = await registry.installScript('acme', script('fresh'), { overwrite: false });
    await fresh.undo();
    expect((await kv.get('acme.fresh'))?.operation).not.toBe('PUT');
  });

  it('refuses a builtin’s name, a reserved tenant, and a script registered like any tool', async () => {
    const named = script('read_file');
    expect(
      await toolgateRejection(registry.installScript('acme', named, { overwrite: true })),
    ).toMatchObject({
      code: ErrorCode.Config,
      details: { reason: 'builtin-name' },
    });
    expect(
      (await toolgateRejection(registry.installScript('_script', script('x'), { overwrite: true })))
        .code,
    ).toBe(ErrorCode.Config);
    expect((await toolgateRejection(registry.register('acme', script('plain').tool))).code).toBe(
      ErrorCode.Config,
    );
  });

  it('never hands out files that do not match their hash', async () => {
    const kv = await new Kvm(t.nc).open(t.subjects.toolsBucket);
    const planted = script('planted');
    const sha = planted.tool.version!.slice('script:'.length);
    await kv.put(`_script.${sha}`, JSON.stringify({ source: 'return "forged";', sidecar: null }));
    expect(await registry.scriptFiles(sha)).toBeUndefined();
    expect(await registry.scriptFiles('not-a-hash')).toBeUndefined();
  });

  it('announces directory scripts to every tenant, removes the ones that are gone, keeps the inventory', async () => {
    const skipped = [
      { file: 'bad.js', reason: { code: 'syntax-error' as const, message: 'nope' } },
    ];
    await registry.announceScripts([script('dir_a'), script('dir_b')], {
      path: '/scripts',
      loadedAt: '2026-01-01T00:00:00.000Z',
      skipped,
    });
    expect(registry.resolve('globex', 'dir_a')).toMatchObject({
      builtin: true,
      policy: { executor: 'script' },
    });
    expect(registry.isBuiltin('dir_b')).toBe(true);
    expect(await registry.scriptDirectory()).toEqual({
      path: '/scripts',
      loadedAt: '2026-01-01T00:00:00.000Z',
      skipped,
    });
    await registry.announceScripts([script('dir_b')], {
      path: '/scripts',
      loadedAt: '2026-01-02T00:00:00.000Z',
      skipped: [],
    });
    expect(registry.resolve('globex', 'dir_a')).toBeUndefined();
    expect(registry.resolve('globex', 'dir_b')).toBeDefined();
    expect(registry.resolve('globex', 'read_file')).toBeDefined();
    // A tenant cannot install over a directory script.
    expect(
      (
        await toolgateRejection(
          registry.installScript('acme', script('dir_b'), { overwrite: true }),
        )
      ).details,
    ).toMatchObject({
      reason: 'builtin-name',
    });
  });
});
