import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, type Isolation, type ToolContext } from '@toolgate/contracts';
import { runTool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import { createBuiltinTools } from './builtin-tools';
import type { ExecutionPolicyInput } from './execution-policy';

function context(
  cwd: string,
  signal?: AbortSignal,
  isolation: Isolation = 'none',
): Omit<ToolContext, 'signal'> & {
  signal?: AbortSignal;
} {
  return {
    runId: 'run-1',
    dispatchId: 'dispatch-1',
    spanId: '0123456789abcdef',
    agent: { agentType: 'tester' },
    cwd,
    isolation,
    log: () => undefined,
    ...(signal ? { signal } : {}),
  };
}

interface ShellOut {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

function ok(outcome: ToolRunOutcome): ShellOut {
  if (!outcome.ok) throw new Error(`expected ok, got ${JSON.stringify(outcome.error)}`);
  return outcome.result as ShellOut;
}

function errorOf(outcome: ToolRunOutcome) {
  if (outcome.ok) throw new Error(`expected an error, got ${JSON.stringify(outcome.result)}`);
  return outcome.error;
}

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

/** Polls until `check` holds; a kill is asynchronous at the OS level. Fails after `limitMs`. */
async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  limitMs = 10_000,
): Promise<void> {
  const until = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function readPid(file: string): Promise<number> {
  let pid = NaN;
  await eventually(async () => {
    pid = Number.parseInt(await fs.readFile(file, 'utf8').catch(() => ''), 10);
    return Number.isInteger(pid) && pid > 0;
  }, `pid written to ${file}`);
  return pid;
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
    createBuiltinTools({
      policy: { cwd: work, ...policy },
      checkDomain: () => 'deny',
      hostEnv,
    }).find((t) => t.contract.name === 'shell')!;
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
  await eventually(() => processGone(pid), `sleep ${pid} killed`);
});

it('honours a shorter per-call timeout, never a longer one than the policy', async () => {
  const pidFile = path.join(work, 'sleep.pid');
  const outcome = await runTool(
    shell({ shell: { timeoutMs: 600_000 } }),
    { command: `sleep 60 & echo $! > ${pidFile}; wait`, timeoutMs: 300 },
    context(work),
  );
  expect(errorOf(outcome).code).toBe(ErrorCode.Timeout);
  await eventually(async () => processGone(await readPid(pidFile)), 'sleep killed');
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
  await eventually(() => processGone(pid), `sleep ${pid} killed`);
});

it('leaves nothing running after the shell exits', async () => {
  const result = ok(await runTool(shell(), { command: 'sleep 60 & echo $!' }, context(work)));
  const pid = Number.parseInt(result.stdout, 10);
  expect(pid).toBeGreaterThan(0);
  await eventually(() => processGone(pid), `background sleep ${pid} killed`);
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
