import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

const call = dispatchRequests('run-scope-swap', 'swapper', 20_000);

/**
 * A tenant's own calls turning a scope into a door: the executor's read scope is a folder of its
 * directory (`EXECUTOR_READ_PATHS=.,docs`, not there yet), which a `shell` call can create — as a
 * symlink to the host folder holding the service's keys. The next calls must not read the keys
 * through `docs`: the sandbox binds only the real paths the service started with.
 */
describe('a read scope a tool swapped for a symlink to the host', () => {
  let stack: TestStack;
  let host: string;
  const keys = `PRIVATE KEY ${randomBytes(16).toString('hex')}`;

  beforeAll(async () => {
    host = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-host-keys-')));
    await writeFile(path.join(host, 'dev-signing-keys.json'), keys);
    stack = await startTestStack('scope-swap', { EXECUTOR_READ_PATHS: '.,docs' });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    await rm(host, { recursive: true, force: true });
  });

  const dispatch = async (tool: string, input: unknown) => {
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, call(tool, input));
    expect(res.body.state).toBe('settled');
    return res.body.settled as { outcome: string; result?: unknown; error?: { code: string } };
  };

  it('never reads the host through a read scope turned into a link', async () => {
    expect(await dispatch('shell', { command: `ln -s ${host} docs && echo linked` })).toMatchObject(
      { outcome: 'ok' },
    );
    const answers = [
      await dispatch('shell', { command: `cat ${stack.workdir}/docs/dev-signing-keys.json` }),
      await dispatch('read_file', { path: 'docs/dev-signing-keys.json' }),
      await dispatch('grep', { pattern: 'PRIVATE', path: 'docs' }),
    ];
    // Each ran, and none saw the keys: the link is not followed (not bound, not in the sandbox).
    expect(JSON.stringify(answers)).not.toContain(keys);
  });
});

/**
 * The same for a write scope of its own (`EXECUTOR_WRITE_PATHS=out`, the directory itself
 * read-only), which the sandbox binds writable by itself: swapped for a link to the host folder —
 * here by the test, as a call of another tenant sharing the directory could — `write_file` and
 * `shell` must not write there.
 */
describe('a write scope swapped for a symlink to the host', () => {
  let stack: TestStack;
  let host: string;

  beforeAll(async () => {
    host = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-host-files-')));
    await writeFile(path.join(host, 'victim.txt'), 'host');
    stack = await startTestStack('scope-swap-w', { EXECUTOR_WRITE_PATHS: 'out' });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    await rm(host, { recursive: true, force: true });
  });

  it('never writes the host through it', async () => {
    const out = path.join(stack.workdir, 'out');
    await symlink(host, out);
    const dispatch = (tool: string, input: unknown) =>
      stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, call(tool, input));
    await dispatch('write_file', { path: 'out/victim.txt', content: 'PWNED' });
    await dispatch('write_file', { path: 'out/new.txt', content: 'PWNED' });
    await dispatch('shell', { command: `echo PWNED > ${out}/victim.txt` });
    // Whatever the calls answered, the host folder behind the link is as it was.
    expect(await readFile(path.join(host, 'victim.txt'), 'utf8')).toBe('host');
    expect(await readdir(host)).toEqual(['victim.txt']);
  });
});
