import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { runProcess, type ProcessResult } from '@toolgate/sandbox';
import { tool } from '@toolgate/tools';
import { isInside } from '@toolgate/worktree-guard';
import { runHoldingProtectedPaths } from '../subprocess/protected-binds';
import type { BuiltinDeps } from './builtin-deps';
import { buildEnv } from './execution-policy';

const ShellParams = z.object({
  command: z
    .string()
    .min(1)
    .max(64 * 1024)
    .refine((c) => !c.includes('\0'), { message: 'must not contain a NUL byte' })
    .describe('A command line for /bin/sh -c, run in the pinned working directory.'),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Deadline in ms; the policy cap still applies.'),
});

/** What shell returns when the command ran to its end (any exit code). */
export interface ShellResult {
  /** The exit code, or null when a signal ended the shell. */
  exitCode: number | null;
  /** The signal that ended the shell, if one did. */
  signal: string | null;
  stdout: string;
  stderr: string;
  /** stdout or stderr went over the output cap and was cut. */
  truncated: boolean;
}

/** How much of each stream a timeout error carries, so the model sees where the command hung. */
const TAIL_ON_TIMEOUT = 2048;

/**
 * `shell`: runs `command` under `/bin/sh -c` with the policy's environment (the allowlist, never
 * the executor's own secrets), in the pinned cwd, with no stdin, a deadline and an output cap.
 *
 * By default it runs in the sandbox (see `@toolgate/sandbox`): the call's directory is the only
 * writable path (none under read-only isolation), the protected paths in it (`.git`, `.env*`, …)
 * hold on the effect (bound read-only with every folder on the way; one the command creates, or
 * a protected symlink it replaces, is put back and the call is denied), there is no network and
 * no view of the host's processes, home or other files, and the deadline or a cancel kills the
 * whole process tree. With the sandbox explicitly off, it runs on the host as its own process
 * group, killed as a group — a child that calls setsid() escapes that, which is why the sandbox is
 * the default.
 */
export function createShellTool(deps: BuiltinDeps) {
  return tool({
    name: 'shell',
    description:
      'Run a command line with /bin/sh -c in the working directory, with a filtered environment, no stdin, ' +
      'a deadline and capped output. Returns exitCode, stdout, stderr and truncated.',
    parameters: ShellParams,
    risk: 'execute',
    async execute(args, ctx): Promise<ShellResult> {
      const policy = deps.policyFor(ctx);
      const timeoutMs = Math.min(args.timeoutMs ?? policy.shell.timeoutMs, policy.shell.timeoutMs);
      const request = {
        argv: [policy.shell.path, '-c', args.command],
        cwd: policy.cwd,
        env: buildEnv(policy, deps.hostEnv),
        timeoutMs,
        maxOutputBytes: policy.maxOutputBytes,
        signal: ctx.signal,
      };
      const run = deps.sandbox
        ? await runHoldingProtectedPaths(deps.sandbox, deps.protectedPaths(ctx), {
            ...request,
            writable: policy.writePaths.some((root) => isInside(root, policy.cwd)),
            // Visible, read-only: a shell command writes only in its own directory.
            readOnlyPaths: [...policy.readPaths, ...policy.writePaths],
          })
        : await runProcess(request);
      return shellResult(run, timeoutMs);
    },
  });
}

function shellResult(run: ProcessResult, timeoutMs: number): ShellResult {
  if (run.ending !== 'exited') {
    throw new ToolgateError(
      run.ending === 'timeout' ? ErrorCode.Timeout : ErrorCode.Cancelled,
      run.ending === 'timeout'
        ? `shell command did not finish within ${timeoutMs} ms`
        : 'shell was cancelled',
      {
        details: {
          stdoutTail: run.stdout.tail(TAIL_ON_TIMEOUT),
          stderrTail: run.stderr.tail(TAIL_ON_TIMEOUT),
        },
      },
    );
  }
  return {
    exitCode: run.exitCode,
    signal: run.signal,
    stdout: run.stdout.text(),
    stderr: run.stderr.text(),
    truncated: run.stdout.truncated || run.stderr.truncated,
  };
}
