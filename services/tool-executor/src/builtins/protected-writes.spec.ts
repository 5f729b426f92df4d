import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import { compilePermissionChain, evaluatePermission } from '@toolgate/permissions';
import { runTool, type ToolDef } from '@toolgate/tools';
import { errorOf, ok, toolContext } from '../../test/tool-harness';
import { createBuiltinTools } from './builtin-tools';

/**
 * The published attack: a tool that may only write files writes `.git/config` with a
 * `core.fsmonitor` command, and the next `git status` in the repository runs it. The chain asks
 * before a write it can see (`.git/config`); write_file refuses the ones it cannot (a symlink into
 * `.git`, a git directory under another name).
 */

let base: string;
let repo: string;
let writeFile: ToolDef;
const chain = compilePermissionChain({}, { preset: 'standard' });
const writeFileRef = { name: 'write_file', risk: 'write' as const };

const git = (...args: string[]) =>
  execFileSync('git', args, {
    cwd: repo,
    stdio: 'pipe',
    env: { PATH: process.env.PATH, HOME: base, GIT_CONFIG_NOSYSTEM: '1' },
  }).toString();

const marker = () => path.join(base, 'pwned');
const poisoned = () =>
  `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "touch ${marker()}; false"\n`;

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-protected-')));
  repo = path.join(base, 'repo');
  await fs.mkdir(repo);
  git('init', '-q');
  writeFile = createBuiltinTools({
    policy: { cwd: repo },
    checkDomain: () => 'deny',
    protectedPaths: () => chain.protectedPaths,
    sandbox: null,
    files: null,
  }).find((t) => t.contract.name === 'write_file')!;
});

afterEach(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

const write = (input: { path: string; content: string }) =>
  runTool(writeFile, input, toolContext(repo));

it('the attack is real: once .git/config is written, git status runs its fsmonitor', async () => {
  // What an approver lets through when they allow the ask (and what `open` used to allow silently).
  ok(await write({ path: '.git/config', content: poisoned() }));
  git('status', '--porcelain');
  expect(await exists(marker())).toBe(true);
});

it('under standard the chain asks before write_file reaches .git/config', async () => {
  const d = await evaluatePermission(chain, writeFileRef, {
    path: '.git/config',
    content: poisoned(),
  });
  expect(d).toMatchObject({ verdict: 'ask', rule: { kind: 'protected-path', pattern: '.git' } });
});

it('a symlink into .git that the chain cannot see is refused on disk; git status runs nothing', async () => {
  await fs.mkdir(path.join(repo, 'docs'));
  await fs.symlink('../.git', path.join(repo, 'docs', 'link'));
  const input = { path: 'docs/link/config', content: poisoned() };
  expect(await evaluatePermission(chain, writeFileRef, input)).toMatchObject({ verdict: 'allow' });
  const before = await fs.readFile(path.join(repo, '.git', 'config'), 'utf8');
  expect(errorOf(await write(input))).toMatchObject({
    code: ErrorCode.Denied,
    message: expect.stringContaining('docs/link/config'),
  });
  expect(await fs.readFile(path.join(repo, '.git', 'config'), 'utf8')).toBe(before);
  git('status', '--porcelain');
  expect(await exists(marker())).toBe(false);
});

it('a git directory under another name is refused, and hooks stay unwritten', async () => {
  git('init', '-q', `--separate-git-dir=${path.join(repo, 'vendored')}`, 'lib');
  const hook = { path: 'vendored/hooks/post-checkout', content: '#!/bin/sh\ntouch pwned\n' };
  expect(await evaluatePermission(chain, writeFileRef, hook)).toMatchObject({ verdict: 'allow' });
  expect(errorOf(await write(hook)).code).toBe(ErrorCode.Denied);
  expect(await exists(path.join(repo, 'vendored', 'hooks', 'post-checkout'))).toBe(false);
});

it('ordinary writes in the repository still go through', async () => {
  expect(ok(await write({ path: 'src/app.ts', content: 'export {};\n' }))).toMatchObject({
    created: true,
  });
});
