import { spawn } from 'node:child_process';
import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
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
 * The shell leads its own process group; on timeout or abort the whole group gets SIGKILL, and
 * when the shell exits whatever it left running in its group is killed too — a tool call never
 * leaves processes behind. (A child that calls setsid() escapes; that is what containment is for.)
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
      return runShell({
        shell: policy.shell.path,
        command: args.command,
        cwd: policy.cwd,
        env: buildEnv(policy, deps.hostEnv),
        timeoutMs,
        maxBytes: policy.maxOutputBytes,
        signal: ctx.signal,
      });
    },
  });
}

interface RunShellOptions {
  shell: string;
  command: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  maxBytes: number;
  signal: AbortSignal;
}

function runShell(o: RunShellOptions): Promise<ShellResult> {
  return new Promise<ShellResult>((resolve, reject) => {
    if (o.signal.aborted) {
      reject(new ToolgateError(ErrorCode.Cancelled, 'shell was cancelled before it started'));
      return;
    }
    const child = spawn(o.shell, ['-c', o.command], {
      cwd: o.cwd,
      env: o.env,
      // detached: the shell becomes a process-group leader, so one kill(-pgid) reaches every
      // descendant that did not start its own session.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout = new CappedBuffer(o.maxBytes);
    const stderr = new CappedBuffer(o.maxBytes);
    child.stdout.on('data', (b: Buffer) => stdout.push(b));
    child.stderr.on('data', (b: Buffer) => stderr.push(b));

    let ending: ToolgateError | undefined;
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const stop = (why: ToolgateError) => {
      ending ??= why;
      killGroup();
    };
    const timer = setTimeout(
      () =>
        stop(
          new ToolgateError(
            ErrorCode.Timeout,
            `shell command did not finish within ${o.timeoutMs} ms`,
          ),
        ),
      o.timeoutMs,
    );
    const onAbort = () => stop(new ToolgateError(ErrorCode.Cancelled, 'shell was cancelled'));
    o.signal.addEventListener('abort', onAbort, { once: true });

    // 'exit' fires when the shell is gone; a background child may still hold the pipes open, and
    // 'close' would wait for it. Killing the group here reaps the stragglers and lets 'close' come.
    child.once('exit', killGroup);
    child.once('error', (err) => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      reject(
        new ToolgateError(
          ErrorCode.ToolFailed,
          `shell could not start: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        ),
      );
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      if (ending) {
        reject(
          new ToolgateError(ending.code, ending.message, {
            details: {
              stdoutTail: stdout.tail(TAIL_ON_TIMEOUT),
              stderrTail: stderr.tail(TAIL_ON_TIMEOUT),
            },
          }),
        );
        return;
      }
      resolve({
        exitCode: code,
        signal: signal ?? null,
        stdout: stdout.text(),
        stderr: stderr.text(),
        truncated: stdout.truncated || stderr.truncated,
      });
    });
  });
}

/** Keeps the first `max` bytes of a stream and drops the rest (the pipe keeps draining). */
class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    const room = this.max - this.size;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept !== chunk) this.truncated = true;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  text(): string {
    // Decoding a byte prefix may end in half a character; the decoder turns it into U+FFFD.
    return Buffer.concat(this.chunks).toString('utf8');
  }

  tail(bytes: number): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - bytes)).toString('utf8');
  }
}
