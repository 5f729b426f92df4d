import { spawn } from 'node:child_process';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { CappedBuffer } from './capped-buffer';

/** One process to run: argv (never a shell string), its directory, environment and bounds. */
export interface ProcessRequest {
  /** `argv[0]` is the program, looked up on `env.PATH` when it has no slash. */
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The whole environment of the process: nothing else from the caller's reaches it. */
  readonly env: Readonly<Record<string, string>>;
  /** Written to stdin, which is then closed. Absent: stdin is /dev/null. */
  readonly stdin?: string | Uint8Array;
  /** Wall-clock deadline; at it the process group is killed. */
  readonly timeoutMs: number;
  /** Cap on each of stdout and stderr; bytes beyond it are read and dropped. */
  readonly maxOutputBytes: number;
  /** Aborting kills the process group (a cancelled call). */
  readonly signal?: AbortSignal;
  /** Open descriptors the process receives as fds 3, 4, … (the sandbox's protected paths). */
  readonly passFds?: readonly number[];
}

/** How a run ended, whatever its exit status. */
export interface ProcessResult {
  /** `exited`: it ended by itself; `timeout`/`cancelled`: we killed it. */
  ending: 'exited' | 'timeout' | 'cancelled';
  /** The exit code, or null when a signal ended the process. */
  exitCode: number | null;
  /** The signal that ended the process, if one did. */
  signal: NodeJS.Signals | null;
  stdout: CappedBuffer;
  stderr: CappedBuffer;
}

/**
 * Runs one process to its end and never leaves any of it behind. The process leads a process
 * group of its own; at the deadline, on abort, and as soon as it exits, the whole group gets
 * SIGKILL (stragglers that kept a pipe open included). A descendant that starts its own session
 * escapes a group kill: that is what the sandbox's PID namespace is for.
 *
 * Resolves for every ending, non-zero exits and kills included; rejects only when the process
 * could not be started at all (a `tool-failed` error naming the errno).
 */
export function runProcess(request: ProcessRequest): Promise<ProcessResult> {
  const stdout = new CappedBuffer(request.maxOutputBytes);
  const stderr = new CappedBuffer(request.maxOutputBytes);
  if (request.signal?.aborted) {
    return Promise.resolve({ ending: 'cancelled', exitCode: null, signal: null, stdout, stderr });
  }
  return new Promise<ProcessResult>((resolve, reject) => {
    const [program, ...args] = request.argv;
    if (program === undefined) {
      reject(new ToolgateError(ErrorCode.Internal, 'runProcess needs a program'));
      return;
    }
    const child = spawn(program, args, {
      cwd: request.cwd,
      env: request.env,
      // A process-group leader: one kill(-pgid) reaches every descendant in its session.
      detached: true,
      stdio: [
        request.stdin === undefined ? 'ignore' : 'pipe',
        'pipe',
        'pipe',
        ...(request.passFds ?? []),
      ],
    });
    let ending: ProcessResult['ending'] = 'exited';
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const stop = (why: ProcessResult['ending']) => {
      if (ending === 'exited') ending = why;
      killGroup();
    };
    const timer = setTimeout(() => stop('timeout'), request.timeoutMs);
    const onAbort = () => stop('cancelled');
    request.signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
    };

    child.stdout?.on('data', (b: Buffer) => stdout.push(b));
    child.stderr?.on('data', (b: Buffer) => stderr.push(b));
    if (child.stdin) {
      // A process that exits without reading its input closes the pipe: EPIPE is not a failure.
      child.stdin.on('error', () => undefined);
      child.stdin.end(request.stdin);
    }
    // 'exit' fires when the process is gone; a straggler may still hold the pipes open, and
    // 'close' would wait for it. Killing the group reaps the stragglers and lets 'close' come.
    child.once('exit', killGroup);
    child.once('error', (err) => {
      done();
      reject(
        new ToolgateError(
          ErrorCode.ToolFailed,
          `${path.basename(program)} could not start: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        ),
      );
    });
    child.once('close', (exitCode, signal) => {
      done();
      resolve({ ending, exitCode, signal, stdout, stderr });
    });
  });
}
