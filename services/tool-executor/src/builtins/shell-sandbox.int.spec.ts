/**
 * `shell` in its default mode, through the sandbox, attacked the way a model's command would:
 * what the same command does on the host (sandbox off) is shown first where it makes the point.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { ErrorCode, type Isolation } from '@toolgate/contracts';
import { DEFAULT_PROTECTION } from '@toolgate/permissions';
import { Sandbox } from '@toolgate/sandbox';
import { runTool } from '@toolgate/tools';
import { builtin, errorOf, ok as okResult, toolContext } from '../../test/tool-harness';
import type { ShellResult } from './shell-tool';

const ok = okResult<ShellResult>;
let sandbox: Sandbox;
let work: string;
let home: string;

beforeAll(async () => {
  sandbox = await Sandbox.open();
});

beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-shell-sbx-')));
  home = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-shell-home-')));
});

afterEach(async () => {
  await fs.rm(work, { recursive: true, force: true });
  await fs.rm(home, { recursive: true, force: true });
});

/** `shell` as the executor builds it, on this process's real environment, HOME a temp dir. */
const shell = (mode: Sandbox | null, hostEnv: NodeJS.ProcessEnv = { ...process.env, HOME: home }) =>
  builtin('shell', {
    policy: { cwd: work },
    checkDomain: () => 'deny',
    protectedPaths: () => DEFAULT_PROTECTION,
    hostEnv,
    sandbox: mode,
  });

const run = (mode: Sandbox | null, command: string, isolation: Isolation = 'none', cwd = work) =>
  runTool(shell(mode), { command }, toolContext(cwd, { isolation }));

it("cannot read the service's environment through /proc/$PPID/environ, as it could on the host", async () => {
  // What this process started with: every variable, allowlisted or not.
  const ours = readFileSync('/proc/self/environ', 'utf8').split('\0').filter(Boolean);
  const notAllowlisted = ours.filter(
    // …and what every shell sets itself (the launcher's bash has its own SHLVL and PWD).
    (kv) =>
      !/^(PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_[A-Z]+|TERM|TZ|TMPDIR|SHLVL|PWD)=/.test(kv),
  );
  const probe = 'cat /proc/$PPID/environ; echo; cat /proc/*/environ';

  const onHost = ok(await run(null, probe)).stdout;
  expect(onHost.split('\0')).toEqual(expect.arrayContaining(ours));

  const contained = ok(await run(sandbox, probe)).stdout;
  for (const kv of notAllowlisted) expect(contained).not.toContain(kv);
  expect(contained).toContain('HOME=/tmp');
});

it('cannot read a secret planted in the service home', async () => {
  const secret = `token-${randomBytes(12).toString('hex')}`;
  await fs.writeFile(path.join(home, '.netrc'), `machine api password ${secret}\n`);
  const probe = `cat ${home}/.netrc`;
  expect(ok(await run(null, probe)).stdout).toContain(secret);
  const contained = ok(await run(sandbox, probe));
  expect(contained.stdout).not.toContain(secret);
  expect(contained.exitCode).not.toBe(0);
});

it('writes in its directory only, never into .git, and not at all under readonly isolation', async () => {
  execFileSync('git', ['init', '-q', work]);
  await fs.writeFile(path.join(work, '.env.local'), 'KEY=1\n');
  const outside = `${home}/planted`;
  const result = ok(
    await run(
      sandbox,
      `echo x > ${outside}; echo x >> .git/config; echo x >> .env.local; echo kept > kept.txt && echo wrote`,
    ),
  );
  expect(result.stdout).toBe('wrote\n');
  await expect(fs.access(outside)).rejects.toThrow();
  expect(await fs.readFile(path.join(work, '.git', 'config'), 'utf8')).not.toContain('x\n');
  expect(await fs.readFile(path.join(work, '.env.local'), 'utf8')).toBe('KEY=1\n');
  expect(await fs.readFile(path.join(work, 'kept.txt'), 'utf8')).toBe('kept\n');

  const readonly = ok(await run(sandbox, 'echo x > new.txt || echo refused', 'readonly'));
  expect(readonly.stdout).toBe('refused\n');
  await expect(fs.access(path.join(work, 'new.txt'))).rejects.toThrow();
});

it('runs in the worktree a dispatch names, writable there', async () => {
  const wt = path.join(work, 'wt');
  await fs.mkdir(wt);
  const result = ok(await run(sandbox, 'pwd; echo y > here.txt', { kind: 'worktree' }, wt));
  expect(result.stdout).toBe(`${wt}\n`);
  expect(await fs.readFile(path.join(wt, 'here.txt'), 'utf8')).toBe('y\n');
});

it('times out with the output so far, and nothing of the command survives', async () => {
  const marker = `${4000 + Math.floor(Math.random() * 1000)}.${randomBytes(2).readUInt16BE(0)}`;
  // The deadline must also cover the sandbox's start and the first `echo`, whose output is
  // asserted: 5 s, not 1.5 s, which a loaded machine can spend before the command runs.
  const outcome = await runTool(
    shell(sandbox),
    { command: `echo started; (trap '' TERM; sleep ${marker}) & sleep ${marker}`, timeoutMs: 5000 },
    toolContext(work),
  );
  const error = errorOf(outcome);
  expect(error.code).toBe(ErrorCode.Timeout);
  expect(error.details).toMatchObject({ stdoutTail: 'started\n' });
  const survivors = readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    });
  expect(survivors).toEqual([]);
});
