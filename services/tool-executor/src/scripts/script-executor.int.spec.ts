import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, type WireError } from '@toolgate/contracts';
import {
  checkFetchHost,
  compilePermissionChain,
  evaluatePermission,
  type PermissionChain,
} from '@toolgate/permissions';
import { ToolRegistry } from '@toolgate/registry';
import { Sandbox } from '@toolgate/sandbox';
import { checkScript, ScriptEngine } from '@toolgate/script-tools';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { runTool, type ToolRunOutcome } from '@toolgate/tools';
import { createBuiltinTools } from '../builtins';
import { FileScopePool } from '../builtins/file-scope/file-scope-pool';
import type { PendingCall } from '../execution/pending-call';
import { toolContext } from '../execution/tool-context';
import { ScriptExecutor } from './script-executor';

/**
 * The script executor against a real registry bucket, real builtins on a scratch directory and the
 * real permission chain: what a script can reach is what its @requires names and the policy allows,
 * each attack checked on the side effect (the file, the server, the marker), not only the answer.
 */

let t: TestNats;
let registry: ToolRegistry;
let engine: ScriptEngine;
let work: string;
let outside: string;
let chain: PermissionChain;
let server: { port: number; seen: string[]; close(): Promise<void> };
/** Host calls wait here when a test holds them (the call is then mid-run). */
let gate: Promise<void> | undefined;
let sandbox: Sandbox;
let files: FileScopePool;

beforeAll(async () => {
  t = await useTestNats('script-executor');
  registry = await ToolRegistry.open(t.nc, t.subjects);
  engine = await ScriptEngine.load();
  sandbox = await Sandbox.open();
  files = new FileScopePool(sandbox);
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-script-work-'));
  outside = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-script-outside-'));
  await fs.writeFile(path.join(work, 'notes.txt'), 'hello from the workdir\n');
  await fs.writeFile(path.join(outside, 'secret.txt'), 'TOP SECRET\n');
  execFileSync('git', ['init', '-q', work]);
  chain = compilePermissionChain({
    deny: [{ tool: 'http_fetch', domains: ['127.0.0.1'], reason: 'no loopback' }],
    ask: [{ argv: 'rm **', reason: 'removals need a human' }],
  });
  const seen: string[] = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    res.end('loopback secret');
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  server = {
    port: (srv.address() as AddressInfo).port,
    seen,
    close: () => new Promise<void>((resolve) => srv.close(() => resolve())),
  };
  await registry.announce([], ['inprocess', 'remote', 'script']);
});

afterAll(async () => {
  await files?.close();
  registry?.stop();
  await t?.cleanup();
  await server?.close();
  await fs.rm(work, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

function builtinTools() {
  return createBuiltinTools({
    // The domain rules are under test: every internal address opened (the executor's default: none).
    policy: { cwd: work, http: { internal: ['0.0.0.0/0', '::/0'] } },
    checkDomain: (host) => checkFetchHost(chain, host).verdict,
    protectedPaths: () => chain.protectedPaths,
    sandbox,
    files,
  });
}

function executor(options: Partial<ConstructorParameters<typeof ScriptExecutor>[0]> = {}) {
  const builtins = builtinTools();
  return new ScriptExecutor({
    engine,
    registry: async () => registry,
    builtins: new Map(builtins.map((b) => [b.contract.name, b])),
    decideHostCall: async (call, tool, input) => {
      await gate;
      return evaluatePermission(chain, tool, input, {
        agent: call.agent,
        isolation: call.isolation,
      });
    },
    ...options,
  });
}

/** Installs a script for tenant acme (as the gateway does) and returns its contract hash. */
async function install(name: string, body: string, header = ''): Promise<string> {
  const source = `// @tool ${name}\n// @description The ${name} script.\n${header}${body}`;
  const checked = checkScript(
    { source },
    {
      expectedName: { name, from: 'install' },
      isBuiltin: () => false,
      syntaxError: (s, f) => engine.syntaxError(s, f),
    },
  );
  if (!checked.ok) throw new Error(checked.refusal.message);
  const { manifest } = checked;
  await registry.installScript(
    'acme',
    {
      tool: {
        ...manifest.contract,
        policy: { executor: 'script', risk: manifest.risk, needsApproval: false },
      },
      source,
    },
    { overwrite: true },
  );
  return manifest.contractHash;
}

let dispatches = 0;
function call(name: string, contractHash: string, input: unknown = {}): PendingCall {
  dispatches++;
  return {
    tenant: 'acme',
    runId: 'run-1',
    dispatchId: `d-${dispatches}`,
    tool: { name, contractHash, needsApproval: false, executor: 'script' },
    input,
    agent: { agentType: 'tester' },
    isolation: 'none',
    causationId: 'c',
    decidedBy: 'default',
  };
}

async function run(name: string, hash: string, input: unknown = {}): Promise<ToolRunOutcome> {
  return executor().run(call(name, hash, input), { cwd: work, timeoutMs: 10_000 });
}

function result(outcome: ToolRunOutcome): unknown {
  if (!outcome.ok) throw new Error(`expected ok, got ${JSON.stringify(outcome.error)}`);
  return outcome.result;
}

function error(outcome: ToolRunOutcome): WireError {
  if (outcome.ok) throw new Error(`expected an error, got ${JSON.stringify(outcome.result)}`);
  return outcome.error;
}

describe('script executor', () => {
  it('runs a script with its params and settles its value', async () => {
    const hash = await install(
      'upper',
      'return { upper: params.text.toUpperCase() };',
      '// @param text string required "text"\n',
    );
    expect(result(await run('upper', hash, { text: 'abc' }))).toEqual({ upper: 'ABC' });
  });

  it('defines only the host functions @requires names', async () => {
    const hash = await install(
      'probe',
      'return [typeof read_file, typeof write_file, typeof http_get, typeof shell];',
      '// @requires read_file\n',
    );
    expect(result(await run('probe', hash))).toEqual([
      'function',
      'undefined',
      'undefined',
      'undefined',
    ]);
  });

  it('reads inside the call’s scope; a read outside it is refused', async () => {
    const hash = await install(
      'reader',
      'const out = [await read_file("notes.txt")];\n' +
        'try { out.push(await read_file(params.path)); } catch (e) { out.push(e.code); }\n' +
        'return out;',
      '// @param path string required "p"\n// @requires read_file\n',
    );
    const outcome = result(await run('reader', hash, { path: path.join(outside, 'secret.txt') }));
    expect(outcome).toEqual(['hello from the workdir\n', ErrorCode.PathOutsideScope]);
    expect(JSON.stringify(outcome)).not.toContain('TOP SECRET');
  });

  it('writes through the chain: .git/config is a protected path, so the write is refused', async () => {
    const before = await fs.readFile(path.join(work, '.git', 'config'), 'utf8');
    const hash = await install(
      'writer',
      'const ok = await write_file("out.txt", "fine");\n' +
        'try { await write_file(".git/config", "[core]\\n\\tfsmonitor = touch /tmp/pwned\\n"); return "wrote"; }\n' +
        'catch (e) { return [ok.bytesWritten, e.code, e.message]; }',
      '// @requires write_file\n',
    );
    const [bytes, code, message] = result(await run('writer', hash)) as [number, string, string];
    expect([bytes, code]).toEqual([4, ErrorCode.Denied]);
    expect(message).toMatch(/approval/);
    expect(await fs.readFile(path.join(work, 'out.txt'), 'utf8')).toBe('fine');
    expect(await fs.readFile(path.join(work, '.git', 'config'), 'utf8')).toBe(before);
  });

  it("bounds a host call's input by the builtin's own schema before the chain is asked", async () => {
    // A path of 2 MiB: matched against the protected paths on the executor's thread, it held
    // every tenant's calls for seconds. Refused as the builtin would refuse it, chain unasked.
    const asked: string[] = [];
    const bounded = executor({
      decideHostCall: async (c, tool, input) => {
        asked.push(String((input as { path?: unknown }).path).slice(0, 16));
        return evaluatePermission(chain, tool, input, { agent: c.agent, isolation: c.isolation });
      },
    });
    const hash = await install(
      'hog',
      'const big = "a/".repeat(1 << 20);\n' +
        'const codes = await Promise.all([0, 1, 2, 3].map(() => write_file(big, "x").then(() => "wrote", (e) => e.code)));\n' +
        'const ok = await write_file("small.txt", "fine");\n' +
        'return [codes, ok.bytesWritten];',
      '// @requires write_file\n',
    );
    const outcome = await bounded.run(call('hog', hash), { cwd: work, timeoutMs: 20_000 });
    expect(result(outcome)).toEqual([Array(4).fill(ErrorCode.InvalidArguments), 4]);
    expect(asked).toEqual(['small.txt']);
  });

  it('refuses a denied host in every spelling, and the server never sees a request', async () => {
    const spellings = [
      `http://127.0.0.1:${server.port}/`,
      `http://2130706433:${server.port}/`,
      `http://0x7f.1:${server.port}/`,
      `http://0177.0.0.1:${server.port}/`,
      `http://127.1:${server.port}/`,
      `http://[::ffff:127.0.0.1]:${server.port}/`,
      `http://[::ffff:7f00:1]:${server.port}/`,
      `http://localhost:${server.port}/`,
      `http://127.0.0.1.:${server.port}/`,
    ];
    const hash = await install(
      'fetcher',
      'const out = [];\n' +
        'for (const url of params.urls) { try { out.push((await http_get(url)).body); } catch (e) { out.push(e.code); } }\n' +
        'return out;',
      '// @param urls array required "urls"\n// @requires http_get\n',
    );
    const outcome = result(await run('fetcher', hash, { urls: spellings })) as string[];
    expect(outcome).toHaveLength(spellings.length);
    for (const code of outcome) expect(code).toBe(ErrorCode.Denied);
    expect(server.seen).toEqual([]);
  });

  it('runs a shell command the policy allows, in the sandbox; one it asks on is refused and never runs', async () => {
    await fs.writeFile(path.join(work, 'victim.txt'), 'still here');
    const hash = await install(
      'sh',
      'const echo = await shell("echo hi");\n' +
        'const peek = await shell("cat " + params.secret);\n' +
        'try { await shell("rm -f victim.txt"); return "removed"; }\n' +
        'catch (e) { return [echo.stdout, peek.exitCode === 0, peek.stdout, e.code]; }',
      '// @param secret string required "a path outside the workdir"\n// @requires shell\n',
    );
    const outcome = result(await run('sh', hash, { secret: path.join(outside, 'secret.txt') }));
    expect(outcome).toEqual(['hi\n', false, '', ErrorCode.Denied]);
    expect(await fs.readFile(path.join(work, 'victim.txt'), 'utf8')).toBe('still here');
  });

  it('a call runs the version it was decided on, even when a new one is installed mid-call', async () => {
    const v1 = await install(
      'versioned',
      'await read_file("notes.txt"); return "v1";',
      '// @requires read_file\n',
    );
    let release!: () => void;
    gate = new Promise<void>((resolve) => (release = resolve));
    const running = run('versioned', v1);
    const v2 = await install(
      'versioned',
      'await read_file("notes.txt"); return "v2";',
      '// @requires read_file\n',
    );
    expect(v2).not.toBe(v1);
    release();
    gate = undefined;
    expect(result(await running)).toBe('v1');
    expect(result(await run('versioned', v2))).toBe('v2');
  });

  it('does not run a script whose stored files do not match the contract', async () => {
    const hash = await install('stored', 'return "real";');
    const contract = await registry.contract(hash);
    const sha = contract!.version!.slice('script:'.length);
    const { Kvm } = await import('@nats-io/kv');
    const kv = await new Kvm(t.nc).open(t.subjects.toolsBucket);
    await kv.put(`_script.${sha}`, JSON.stringify({ source: 'return "forged";', sidecar: null }));
    expect(error(await run('stored', hash)).code).toBe(ErrorCode.UnknownTool);
    expect(error(await run('stored', 'f'.repeat(64))).code).toBe(ErrorCode.UnknownTool);
  });

  it('settles limits as typed errors: a runaway loop, a non-JSON result', async () => {
    const loop = await install('loop', 'for (;;) {}');
    const slow = new ScriptExecutor({
      engine,
      registry: async () => registry,
      builtins: new Map(),
      limits: { cpuMs: 50 },
    });
    expect(error(await slow.run(call('loop', loop), { cwd: work, timeoutMs: 10_000 })).code).toBe(
      ErrorCode.Timeout,
    );
    const fn = await install('fn', 'return () => 1;');
    expect(error(await run('fn', fn)).code).toBe(ErrorCode.NonSerializableResult);
  });

  it('a memory bomb and a spinning script stall no one: list_dir and a second script complete while they run, the bomb settles at its deadline or heap limit, the executor keeps serving', async () => {
    const header = '// @requires read_file\n';
    const bomb = await install(
      'bomb',
      'await read_file("notes.txt");\nconst a = [];\nfor (;;) a.push("x".repeat(1 << 20));',
      header,
    );
    const spin = await install('spin', 'await read_file("notes.txt");\nfor (;;) {}', header);
    const upper = await install(
      'upper',
      'return { upper: (await read_file("notes.txt")).trim().toUpperCase() };',
      header,
    );
    // The attackers' first host call says they run; their budgets are ones only a deadline or a
    // cancel can end.
    const running = new Set<string>();
    let bothRunning!: () => void;
    const attackersRun = new Promise<void>((resolve) => (bothRunning = resolve));
    const inner = executor();
    const attackers = executor({
      limits: { cpuMs: 600_000, memoryBytes: 256 * 1024 * 1024 },
      decideHostCall: async (c, tool, input) => {
        running.add(c.tool.name);
        if (running.size === 2) bothRunning();
        return evaluatePermission(chain, tool, input, { agent: c.agent, isolation: c.isolation });
      },
    });
    const settled: string[] = [];
    const cancel = new AbortController();
    const bombCall = attackers
      .run(call('bomb', bomb), { cwd: work, timeoutMs: 8_000 })
      .finally(() => settled.push('bomb'));
    const spinCall = attackers
      .run(call('spin', spin), { cwd: work, timeoutMs: 600_000, signal: cancel.signal })
      .finally(() => settled.push('spin'));
    await attackersRun;

    const listDir = builtinTools().find((b) => b.contract.name === 'list_dir')!;
    const listing = runTool(listDir, {}, toolContext(call('list_dir', 'builtin'), work, undefined))
      .then(result)
      .finally(() => settled.push('list_dir'));
    const second = inner.run(call('upper', upper), { cwd: work, timeoutMs: 10_000 }).then(result);
    await expect(listing).resolves.toMatchObject({
      entries: expect.arrayContaining([expect.objectContaining({ name: 'notes.txt' })]),
    });
    await expect(second).resolves.toEqual({ upper: 'HELLO FROM THE WORKDIR' });
    // Neither attacker has settled: the neighbours did not wait for them.
    expect(settled).toEqual(['list_dir']);

    cancel.abort();
    expect(error(await spinCall).code).toBe(ErrorCode.Cancelled);
    // Ended by whichever of its bounds it reaches first: the deadline, or (on a fast machine) its
    // 256 MiB heap — a full run once saw the heap first.
    const bombed = error(await bombCall);
    if (bombed.code === ErrorCode.Timeout) expect(bombed.message).toMatch(/within 8000 ms/);
    else
      expect(bombed).toMatchObject({
        code: ErrorCode.ToolFailed,
        message: expect.stringContaining('ran out of memory'),
        details: { limit: 'memory' },
      });
    expect(result(await inner.run(call('upper', upper), { cwd: work, timeoutMs: 10_000 }))).toEqual(
      {
        upper: 'HELLO FROM THE WORKDIR',
      },
    );
  });
});
