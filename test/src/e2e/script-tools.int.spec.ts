/**
 * Script tools through the whole pipeline over real NATS: an admin installs a script (HTTP and the
 * bus API), the install is journaled, the inventory lists it and the executor directory's files
 * (loaded and skipped, with reasons), and a dispatch runs it in the script executor: gateway →
 * evaluator → executor (QuickJS) → journal. The sandbox limits and host-function gating are proved
 * in libs/script-tools and the executor's own specs; this proves the wiring end to end.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { headers as natsHeaders } from '@nats-io/transport-node';
import {
  ApiOperation,
  parseJournalEvent,
  SCRIPTS_RUN_ID,
  type ScriptInstalledEvent,
} from '@toolgate/contracts';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

const call = dispatchRequests('run-scripts', 'scripts', 15_000);

const SHOUT = [
  '// @tool shout',
  '// @description Reads a note and shouts it',
  '// @param path string required "the note"',
  '// @param times integer optional "how many times"',
  '// @requires read_file',
  'const text = (await read_file(params.path)).trim().toUpperCase();',
  'return { text: Array(params.times ?? 1).fill(text).join(" ") };',
].join('\n');

describe('script tools through the pipeline', () => {
  let stack: TestStack;
  let scriptsDir: string;

  beforeAll(async () => {
    scriptsDir = await mkdtemp(path.join(tmpdir(), 'toolgate-scripts-dir-'));
    await writeFile(
      path.join(scriptsDir, 'double.js'),
      '// @tool double\n// @description Doubles a number\n// @param n number required "n"\nreturn params.n * 2;',
    );
    await writeFile(
      path.join(scriptsDir, 'broken.js'),
      '// @tool broken\n// @description d\nreturn (;',
    );
    await writeFile(
      path.join(scriptsDir, 'misnamed.js'),
      '// @tool other\n// @description d\nreturn 1;',
    );
    stack = await startTestStack('scripts', { EXECUTOR_SCRIPTS_DIR: scriptsDir });
    await writeFile(path.join(stack.workdir, 'note.txt'), 'hello there\n');
  });
  afterAll(async () => {
    await stack.stop();
    await rm(scriptsDir, { recursive: true, force: true });
  });

  it('installing is an admin operation', async () => {
    const res = await stack.http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAgent, {
      source: SHOUT,
    });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
  });

  it('installs a script, journals the install, and runs it end to end', async () => {
    const installed = await stack.http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAdmin, {
      source: SHOUT,
    });
    expect(installed.status).toBe(200);
    expect(installed.body.script).toMatchObject({
      name: 'shout',
      origin: 'installed',
      requires: ['read_file'],
      risk: 'read',
      parameters: { required: ['path'] },
    });

    // The install is a journal event, naming the identity that made it.
    expect(await installs(stack, 'acme', 'shout')).toEqual({
      count: 1,
      last: expect.objectContaining({
        type: 'script-installed',
        toolName: 'shout',
        contractHash: installed.body.script.contractHash,
        installedBy: 'acme-admin',
        requires: ['read_file'],
      }),
    });

    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('shout', { path: 'note.txt', times: 2 }),
    );
    expect(res.body).toMatchObject({
      state: 'settled',
      settled: { outcome: 'ok', result: { text: 'HELLO THERE HELLO THERE' } },
    });
    // The projection folds the journal behind the settlement: wait until it has the whole history.
    const history = await settled(stack, res.body.dispatchId);
    expect(history.events.find((e) => e.event.type === 'started')?.event.executor).toBe('script');

    // Input is checked against the contract before the script sees it.
    const invalid = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('shout', { paht: 'x' }),
    );
    expect(invalid.body.settled).toMatchObject({
      outcome: 'error',
      error: { code: 'invalid-arguments' },
    });
  });

  it('refuses an overwrite without the flag, and replaces with it (journaled with what it replaced)', async () => {
    const again = await stack.http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAdmin, {
      source: SHOUT.replace('Reads a note', 'Reads a file'),
    });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'conflict', details: { reason: 'exists' } });
    const before = (
      await stack.http('GET', '/v1/tools/scripts', TOKENS.acmeAgent)
    ).body.loaded.find((s: { name: string }) => s.name === 'shout');
    const replaced = await stack.http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAdmin, {
      source: SHOUT.replace('Reads a note', 'Reads a file'),
      overwrite: true,
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.replaced).toBe(before.contractHash);
    expect(await installs(stack, 'acme', 'shout')).toMatchObject({
      count: 2,
      last: { replaced: before.contractHash, contractHash: replaced.body.script.contractHash },
    });
  });

  it('refuses a bad script with its reason, and installs nothing', async () => {
    const cases: [string, string, number, string][] = [
      ['syntax', '// @tool syntax\n// @description d\nreturn (;', 422, 'syntax-error'],
      ['named', '// @tool other\n// @description d\nreturn 1;', 422, 'name-mismatch'],
      ['list_dir', '// @tool list_dir\n// @description d\nreturn 1;', 422, 'builtin-name'],
      ['http_get', '// @tool http_get\n// @description d\nreturn 1;', 422, 'reserved-name'],
      ['double', '// @tool double\n// @description d\nreturn 1;', 422, 'builtin-name'],
      ['nodesc', '// @tool nodesc\nreturn 1;', 422, 'missing-description'],
      ['big', `// @tool big\n// @description d\n${'/'.repeat(300 * 1024)}`, 413, 'too-large'],
    ];
    for (const [name, source, status, reason] of cases) {
      const res = await stack.http('PUT', `/v1/tools/scripts/${name}`, TOKENS.acmeAdmin, {
        source,
        overwrite: true,
      });
      expect([name, res.status, res.body.error?.details?.reason]).toEqual([name, status, reason]);
    }
    const sidecar = await stack.http('PUT', '/v1/tools/scripts/side', TOKENS.acmeAdmin, {
      source: '// @tool side\n// @description d\nreturn params.format;',
      sidecar: { name: 'elsewhere', parameters: { type: 'object' } },
    });
    expect(sidecar.body.error.details.reason).toBe('sidecar-name-mismatch');
    const tools = await stack.http('GET', '/v1/tools', TOKENS.acmeAgent);
    const names = tools.body.tools.map((t: { name: string }) => t.name);
    for (const name of ['syntax', 'named', 'nodesc', 'big', 'side'])
      expect(names).not.toContain(name);
  });

  it('installs over the bus API too, with a sidecar schema', async () => {
    const reply = await stack.nats.nc.request(
      stack.nats.subjects.api(ApiOperation.InstallScript),
      JSON.stringify({
        name: 'pick',
        source: '// @tool pick\n// @description Picks a format\nreturn params.format;',
        sidecar: {
          name: 'pick',
          parameters: {
            type: 'object',
            properties: { format: { enum: ['json', 'yaml'] } },
            required: ['format'],
          },
        },
      }),
      { timeout: 10_000, headers: authHeaders(TOKENS.acmeAdmin) },
    );
    expect(reply.json()).toMatchObject({ ok: true, data: { script: { name: 'pick' } } });
    const ok = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('pick', { format: 'yaml' }),
    );
    expect(ok.body.settled).toMatchObject({ outcome: 'ok', result: 'yaml' });
    const bad = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('pick', { format: 'xml' }),
    );
    expect(bad.body.settled.error.code).toBe('invalid-arguments');
  });

  it('the directory’s scripts serve every tenant; the inventory lists loaded and skipped with reasons', async () => {
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.globexAdmin,
      call('double', { n: 21 }),
    );
    expect(res.body.settled).toMatchObject({ outcome: 'ok', result: 42 });
    const inventory = await stack.http('GET', '/v1/tools/scripts', TOKENS.acmeAgent);
    expect(inventory.status).toBe(200);
    const loaded = Object.fromEntries(
      inventory.body.loaded.map((s: { name: string; origin: string }) => [s.name, s.origin]),
    );
    expect(loaded).toMatchObject({ double: 'directory', shout: 'installed', pick: 'installed' });
    expect(inventory.body.directory.path).toBe(scriptsDir);
    expect(
      Object.fromEntries(
        inventory.body.skipped.map((s: { file: string; reason: { code: string } }) => [
          s.file,
          s.reason.code,
        ]),
      ),
    ).toEqual({ 'broken.js': 'syntax-error', 'misnamed.js': 'name-mismatch' });
    // Another tenant sees the directory's scripts, not acme's.
    const globex = await stack.http('GET', '/v1/tools/scripts', TOKENS.globexAdmin);
    expect(globex.body.loaded.map((s: { name: string }) => s.name)).toEqual(['double']);
  });
});

function authHeaders(token: string) {
  const h = natsHeaders();
  h.set('Authorization', `Bearer ${token}`);
  return h;
}

/** How many installs of a tenant's script the journal holds, and the last one. */
async function installs(
  stack: TestStack,
  tenant: string,
  tool: string,
): Promise<{ count: number; last: ScriptInstalledEvent | null }> {
  const subject = stack.nats.subjects.journal.event(
    tenant,
    SCRIPTS_RUN_ID,
    tool,
    'script-installed',
  );
  const stream = stack.nats.subjects.journal.stream;
  const info = await stack.nats.jsm.streams.info(stream, { subjects_filter: subject });
  const count = info.state.subjects?.[subject] ?? 0;
  if (count === 0) return { count, last: null };
  const msg = await stack.nats.jsm.streams.getMessage(stream, { last_by_subj: subject });
  const event = parseJournalEvent(msg?.json());
  return { count, last: event?.type === 'script-installed' ? event : null };
}
