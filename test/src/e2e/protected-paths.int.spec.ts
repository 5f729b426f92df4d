import { execFileSync } from 'node:child_process';
import { lstat, mkdir, readFile, symlink } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

/**
 * The published attack end to end, through gateway, evaluator and executor: an agent allowed to
 * write files writes `.git/config` with a `core.fsmonitor` command so that the next `git status`
 * runs it. Under `standard` the call is parked for approval, under `strict` it is denied, and a
 * disguised path (a symlink into `.git`) that the chain cannot see is refused by the executor.
 * Each case then runs the real `git status` and checks the command did not run.
 */

const call = dispatchRequests('run-protected', 'protected', 10_000);

describe('protected paths end to end', () => {
  let stack: TestStack;
  let marker: string;
  let poisoned: string;
  let pristine: string;

  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: stack.workdir,
      stdio: 'pipe',
      env: { PATH: process.env.PATH, HOME: stack.workdir, GIT_CONFIG_NOSYSTEM: '1' },
    });
  const ranFsmonitor = () =>
    lstat(marker).then(
      () => true,
      () => false,
    );
  /** Runs `git status` in the workdir, as a person would after the agent's turn. */
  const gitStatusRuns = async () => {
    git('status', '--porcelain');
    return ranFsmonitor();
  };

  beforeAll(async () => {
    stack = await startTestStack('protected');
    git('init', '-q');
    marker = path.join(stack.workdir, '..', `pwned-${path.basename(stack.workdir)}`);
    poisoned = `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "touch ${marker}; false"\n`;
    pristine = await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { profiles: { std: { preset: 'standard' }, locked: { preset: 'strict' } } },
    });
    expect(put.status).toBe(200);
  });
  afterAll(() => stack.stop());

  it('under standard, write_file to .git/config is parked for approval, naming the protected path', async () => {
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('write_file', { path: '.git/config', content: poisoned }, { profile: 'std' }),
    );
    expect(res.status).toBe(202);
    expect(res.body.state).toBe('suspended');
    const decided = await eventually(async () => {
      const h = await stack.http('GET', `/v1/dispatches/${res.body.dispatchId}`, TOKENS.acmeAgent);
      return h.body?.events?.find((e: { event: { type: string } }) => e.event.type === 'decided')
        ?.event;
    });
    expect(decided).toMatchObject({
      verdict: 'ask',
      decidedBy: 'ask-rule',
      rule: { source: 'protected-paths', kind: 'protected-path', path: '.git/config' },
    });
    expect(await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8')).toBe(pristine);
    expect(await gitStatusRuns()).toBe(false);
  });

  it('under strict it is denied, and so is a shell redirection into .git', async () => {
    for (const [tool, input] of [
      ['write_file', { path: '.GIT/hooks/../config', content: poisoned }],
      ['shell', { command: `printf '%s' '${poisoned}' > .git/config` }],
    ] as const) {
      const res = await stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        call(tool, input, { profile: 'locked' }),
      );
      expect(res.body.settled).toMatchObject({
        outcome: 'denied',
        error: { code: 'denied', message: expect.stringContaining('protected path') },
      });
    }
    expect(await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8')).toBe(pristine);
    expect(await gitStatusRuns()).toBe(false);
  });

  it('a symlink into .git that the chain cannot see is refused by the executor', async () => {
    await mkdir(path.join(stack.workdir, 'docs'));
    await symlink('../.git', path.join(stack.workdir, 'docs', 'link'));
    // No profile, no rules: the chain allows writes, and `docs/link/config` names nothing protected.
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('write_file', { path: 'docs/link/config', content: poisoned }),
    );
    expect(res.body).toMatchObject({ state: 'settled' });
    expect(res.body.settled).toMatchObject({
      outcome: 'error',
      error: { code: 'denied', message: expect.stringContaining('docs/link/config') },
    });
    expect(await readFile(path.join(stack.workdir, '.git', 'config'), 'utf8')).toBe(pristine);
    expect(await gitStatusRuns()).toBe(false);
  });

  it('ordinary writes still run', async () => {
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('write_file', { path: 'src/app.ts', content: 'export {};\n' }, { profile: 'std' }),
    );
    expect(res.body.settled).toMatchObject({ outcome: 'ok' });
  });
});
