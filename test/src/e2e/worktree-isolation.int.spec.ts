import { execFileSync } from 'node:child_process';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', ...args], {
    cwd,
    encoding: 'utf8',
  });

describe('isolation through the pipeline', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('isolation');
    // The executor's pinned directory is the host repository the worktree service branches from.
    git(stack.workdir, 'init', '-q', '-b', 'main');
    await writeFile(path.join(stack.workdir, 'README.md'), '# host\n');
    git(stack.workdir, 'add', '-A');
    git(stack.workdir, 'commit', '-q', '-m', 'base');
  });
  afterAll(() => stack.stop());

  const dispatch = (callId: string, tool: string, input: unknown, isolation: unknown) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-iso',
      callId,
      agent: { agentType: 'coder', label: 'fixer' },
      tool,
      input,
      isolation,
      wait: 15_000,
    });

  it('runs a worktree-isolated agent inside its own tree and never touches the host tree', async () => {
    const write = await dispatch(
      'w1',
      'write_file',
      { path: 'fix.txt', content: 'fixed\n' },
      { kind: 'worktree' },
    );
    expect(write.body.settled).toMatchObject({ outcome: 'ok' });
    await expect(stat(path.join(stack.workdir, 'fix.txt'))).rejects.toMatchObject({
      code: 'ENOENT',
    });

    // The read API serves the journal's projection, which folds the events a moment after they
    // are published: wait for it to have the `started` event.
    const started = await eventually(
      async () => {
        const history = await stack.http(
          'GET',
          `/v1/dispatches/${write.body.dispatchId}`,
          TOKENS.acmeAgent,
        );
        return history.body?.events?.find(
          (e: { event: { type: string } }) => e.event.type === 'started',
        );
      },
      { what: 'the started event in the dispatch history' },
    );
    const treeCwd: string = started.event.cwd;
    expect(treeCwd).not.toBe(stack.workdir);
    expect(await readFile(path.join(treeCwd, 'fix.txt'), 'utf8')).toBe('fixed\n');
    expect(await readFile(path.join(treeCwd, 'README.md'), 'utf8')).toBe('# host\n');

    // The same agent's next call lands in the same tree; a write outside it is refused.
    const read = await dispatch('r1', 'read_file', { path: 'fix.txt' }, { kind: 'worktree' });
    expect(JSON.stringify(read.body.settled.result)).toContain('fixed');
    const escape = await dispatch(
      'e1',
      'write_file',
      { path: '../escape.txt', content: 'x' },
      { kind: 'worktree' },
    );
    expect(escape.body.settled).toMatchObject({
      outcome: 'error',
      error: { code: 'path-outside-scope' },
    });
  });

  it('denies write tools under readonly isolation', async () => {
    const res = await dispatch('ro1', 'write_file', { path: 'ro.txt', content: 'x' }, 'readonly');
    expect(res.body.settled).toMatchObject({ outcome: 'denied' });
    const read = await dispatch('ro2', 'read_file', { path: 'README.md' }, 'readonly');
    expect(read.body.settled).toMatchObject({ outcome: 'ok' });
  });
});
