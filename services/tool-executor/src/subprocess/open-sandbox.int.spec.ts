import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import { loadExecutorConfig } from '../config';
import { openExecutorSandbox } from './open-sandbox';

// A directory of its own: not the one jest runs from (Toolgate's checkout, which no tool may
// write), nor the temp directory itself (a checkout may lie in it).
const cwd = mkdtempSync(path.join(os.tmpdir(), 'tg-open-sandbox-'));
const sandboxOf = (env: NodeJS.ProcessEnv) =>
  loadExecutorConfig({ EXECUTOR_CWD: cwd, ...env }).sandbox;

it('opens a working sandbox by default, and none only when explicitly off', async () => {
  const sandbox = await openExecutorSandbox(sandboxOf({}));
  expect(sandbox).not.toBeNull();
  expect(sandbox!.limits).toMatchObject({ cpuSeconds: 60, openFiles: 256, processes: 64 });
  expect(await openExecutorSandbox(sandboxOf({ EXECUTOR_SANDBOX: 'off' }))).toBeNull();
  expect(() => sandboxOf({ EXECUTOR_SANDBOX: 'no' })).toThrow();
  expect(() => sandboxOf({ EXECUTOR_SANDBOX: '' })).toThrow();
});

it('refuses to start with a config error when the sandbox cannot be set up', async () => {
  await expect(
    openExecutorSandbox(sandboxOf({ EXECUTOR_SANDBOX_PIDS_CGROUP: os.tmpdir() })),
  ).rejects.toMatchObject({ code: ErrorCode.Config });
  await expect(
    openExecutorSandbox(sandboxOf({ EXECUTOR_SANDBOX_READ_PATHS: '/nonexistent/tools' })),
  ).rejects.toMatchObject({ code: ErrorCode.Config });
});
