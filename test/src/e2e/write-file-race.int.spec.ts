import { execFileSync } from 'node:child_process';
import { lstat, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * `write_file`'s protected-path check runs in the executor on the path's real location; the write
 * then happens in the file helper. A `shell` call of the same tenant flips `d` between a link to a
 * plain folder and a link to `.git` while `write_file d/config` calls race it: what is written must
 * be what was checked — never `.git/config`, whose planted `core.fsmonitor` the host's next
 * `git status` would run.
 */
describe('write_file against a folder swapped for a link to .git', () => {
  let stack: TestStack;
  let marker: string;
  let pristine: string;
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: stack.workdir,
      stdio: 'pipe',
      env: { PATH: process.env.PATH, HOME: stack.workdir, GIT_CONFIG_NOSYSTEM: '1' },
    });

  beforeAll(async () => {
    stack = await startTestStack('e2e-wfrace');
    git('init', '-q');
    await mkdir(path.join(stack.workdir, 'real'));
    marker = path.join(stack.workdir, '..', `planted-${path.basename(stack.workdir)}`);
    pristine = await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { profiles: { std: { preset: 'standard' } } },
    });
    expect(put.status).toBe(200);
  }, 60_000);
  afterAll(() => stack?.stop());

  it('writes where it checked, never through the swapped link into .git', async () => {
    const poisoned = `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "touch ${marker}; false"\n`;
    let seq = 0;
    const dispatch = (tool: string, input: unknown) =>
      stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: `run-race-${++seq}`,
        callId: 'c',
        agent: { agentType: 'coder' },
        tool,
        input,
        wait: 30_000,
      });
    // Each flip is an atomic rename of a fresh link over `d`: `d` always exists, as one or the other.
    const script =
      'my $end = time + 6; while (time < $end) { ' +
      'symlink("real", "t1"); rename("t1", "d"); symlink(".git", "t2"); rename("t2", "d"); } print "flipped\\n";';
    expect(
      (await dispatch('write_file', { path: 'flip.pl', content: script })).body?.settled?.outcome,
    ).toBe('ok');
    const flipper = dispatch('shell', { command: 'perl flip.pl', timeoutMs: 20_000 });
    // The writes start once the flipper has made `d` a link, not after a fixed 500 ms: on a loaded
    // machine the shell call may not have started by then, and a write that came first would make
    // `d` a plain folder (missing parents are created), which no rename of a link replaces.
    await eventually(
      async () =>
        (await lstat(path.join(stack.workdir, 'd')).catch(() => undefined))?.isSymbolicLink()
          ? true
          : undefined,
      { timeoutMs: 20_000, what: 'the flipper swapping d' },
    );
    let written = 0;
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      const writes = await Promise.all(
        Array.from({ length: 6 }, () =>
          dispatch('write_file', { path: 'd/config', content: poisoned }),
        ),
      );
      written += writes.filter((w) => w.body?.settled?.outcome === 'ok').length;
    }
    expect((await flipper).body?.settled?.outcome).toBe('ok');
    try {
      git('status', '--porcelain');
    } catch {
      // A planted `fsmonitor` ending in `false` makes git complain: the marker is what tells.
    }
    expect(await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8')).toBe(pristine);
    expect(
      await lstat(marker).then(
        () => true,
        () => false,
      ),
    ).toBe(false);
    // The race ran: writes checked while `d` led to `real/` landed there.
    expect(written).toBeGreaterThan(0);
    expect(await readFile(path.join(stack.workdir, 'real', 'config'), 'utf8')).toBe(poisoned);
  }, 60_000);
});
