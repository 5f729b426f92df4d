import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, type Isolation } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { runTool, type ToolDef } from '@toolgate/tools';
import { builtin, errorOf, ok as okResult, toolContext } from '../../test/tool-harness';
import type { ExecutionPolicyInput } from './execution-policy';
import type { ShellResult } from './shell-tool';

/*
 * `shell` with the sandbox explicitly off (EXECUTOR_SANDBOX=off): on the host, as a process group.
 * The sandboxed default is shell-sandbox.int.spec.ts.
 */
const context = (cwd: string, signal?: AbortSignal, isolation?: Isolation) =>
  toolContext(cwd, { ...(signal ? { signal } : {}), ...(isolation ? { isolation } : {}) });
const ok = okResult<ShellResult>;

/** Whether `pid` no longer runs. A zombie counts as gone: it holds no resources and runs nothing. */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** Waits until `pid` is gone; a kill is asynchronous at the OS level. */
async function untilGone(pid: number, what: string): Promise<void> {
  await eventually(() => processGone(pid) || undefined, { what });
}

/** The pid the command wrote to `file`, once it has. */
async function readPid(file: string): Promise<number> {
  return eventually(
    async () => {
      const pid = Number.parseInt(await fs.readFile(file, 'utf8').catch(() => ''), 10);
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    },
    { what: `pid written to ${file}` },
  );
}

const hostEnv = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: '/home/agent',
  SUPER_SECRET_TOKEN: 'tok_do_not_leak',
  DATABASE_URL: 'postgres://user:hunter2@db/toolgate',
  NATS_CREDS: 'nats-creds-do-not-leak',
};

let work: string;
let shell: (policy?: Partial<ExecutionPolicyInput>) => ToolDef;

beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-shell-')));
  shell = (policy = {}) =>
    builtin('shell', {
      policy: { cwd: work, ...policy },
      checkDomain: () => 'deny',
      hostEnv,
      sandbox: null,
    });
});

afterEach(async () => {
  await fs.rm(work, { recursive: true, force: true });
});

it('runs a command and returns exit code, stdout and stderr', async () => {
  expect(
    ok(await runTool(shell(), { command: 'echo out; echo err >&2; exit 3' }, context(work))),
  ).toEqual({
    exitCode: 3,
    signal: null,
    stdout: 'out\n',
    stderr: 'err\n',
    truncated: false,
  });
});

it('runs in the pinned cwd, or in the worktree the dispatch names', async () => {
  expect(ok(await runTool(shell(), { command: 'pwd -P' }, context(work))).stdout).toBe(`${work}\n`);
  const wt = path.join(work, 'wt');
  await fs.mkdir(wt);
  expect(
    ok(await runTool(shell(), { command: 'pwd -P' }, context(wt, undefined, { kind: 'worktree' })))
      .stdout,
  ).toBe(`${wt}\n`);
});

it('gives the command only the allowlisted environment: no secret reaches it', async () => {
  const { stdout } = ok(await runTool(shell(), { command: 'env' }, context(work)));
  expect(stdout).toContain('HOME=/home/agent');
  expect(stdout).toContain(`PATH=${hostEnv.PATH}`);
  for (const leak of [
    'SUPER_SECRET_TOKEN',
    'tok_do_not_leak',
    'DATABASE_URL',
    'hunter2',
    'NATS_CREDS',
  ]) {
    expect(stdout).not.toContain(leak);
  }
  // Nor does anything from the executor's own process environment that is not allowlisted.
  const inherited = ok(
    await runTool(
      shell({ env: { mode: 'inherit-none', set: { ONLY: '1' } } }),
      { command: 'env' },
      context(work),
    ),
  );
  expect(inherited.stdout).toContain('ONLY=1');
  expect(inherited.stdout).not.toContain('HOME=');
});

it('caps stdout and stderr and says so', async () => {
  const result = ok(
    await runTool(
      shell({ maxOutputBytes: 1000 }),
      {
        command: "head -c 100000 /dev/zero | tr '\\000' a; head -c 10 /dev/zero | tr '\\000' b >&2",
      },
      context(work),
    ),
  );
  expect(result.stdout).toBe('a'.repeat(1000));
  expect(result.stderr).toBe('b'.repeat(10));
  expect(result.truncated).toBe(true);
  expect(result.exitCode).toBe(0);
});

it('kills the whole process group on timeout', async () => {
  const pidFile = path.join(work, 'sleep.pid');
  const outcome = await runTool(
    shell({ shell: { timeoutMs: 500 } }),
    { command: `sleep 60 & echo $! > ${pidFile}; echo started; wait` },
    context(work),
  );
  const error = errorOf(outcome);
  expect(error.code).toBe(ErrorCode.Timeout);
  expect(error.details).toMatchObject({ stdoutTail: 'started\n' });
  const pid = await readPid(pidFile);
  await untilGone(pid, `sleep ${pid} killed`);
});

it('honours a shorter per-call timeout, never a longer one than the policy', async () => {
  const pidFile = path.join(work, 'sleep.pid');
  const outcome = await runTool(
    shell({ shell: { timeoutMs: 600_000 } }),
    { command: `sleep 60 & echo $! > ${pidFile}; wait`, timeoutMs: 300 },
    context(work),
  );
  expect(errorOf(outcome).code).toBe(ErrorCode.Timeout);
  await untilGone(await readPid(pidFile), 'sleep killed');
});

it('kills the process group when the dispatch is aborted', async () => {
  const pidFile = path.join(work, 'sleep.pid');
  const controller = new AbortController();
  const running = runTool(
    shell(),
    { command: `sleep 60 & echo $! > ${pidFile}; wait` },
    context(work, controller.signal),
  );
  const pid = await readPid(pidFile);
  expect(processGone(pid)).toBe(false);
  controller.abort();
  expect(errorOf(await running).code).toBe(ErrorCode.Cancelled);
  await untilGone(pid, `sleep ${pid} killed`);
});

it('leaves nothing running after the shell exits', async () => {
  const result = ok(await runTool(shell(), { command: 'sleep 60 & echo $!' }, context(work)));
  const pid = Number.parseInt(result.stdout, 10);
  expect(pid).toBeGreaterThan(0);
  await untilGone(pid, `background sleep ${pid} killed`);
});

it('validates its arguments', async () => {
  expect(errorOf(await runTool(shell(), {}, context(work))).code).toBe(ErrorCode.InvalidArguments);
  expect(errorOf(await runTool(shell(), { command: '' }, context(work))).code).toBe(
    ErrorCode.InvalidArguments,
  );
  expect(
    errorOf(await runTool(shell(), { command: 'true', timeoutMs: -5 }, context(work))).code,
  ).toBe(ErrorCode.InvalidArguments);
});
