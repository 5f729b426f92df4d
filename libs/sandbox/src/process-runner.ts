import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
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
  /**
   * Kills what else belongs to the run whenever its process group is killed: the sandbox's pids
   * cgroup, which holds every process of the run whichever session or parent it ended up with.
   */
  readonly killAlso?: () => void;
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
  /**
   * The kernel's OOM killer ended a process of the run at its memory limit (a sandboxed run with
   * a memory cgroup; absent otherwise).
   */
  memoryExceeded?: boolean;
}

/**
 * Runs one process to its end and never leaves any of it behind. The process leads a process
 * group of its own; at the deadline, on abort, and as soon as it exits, the whole group gets
 * SIGKILL (stragglers that kept a pipe open included), and `killAlso` runs. A descendant that
 * started its own session escapes a group kill, so at the deadline and on abort every descendant
 * still under the process is killed first, parents before children — bubblewrap's init in the
 * sandbox's PID namespace is one (its `--die-with-parent` once left it running, and the run
 * waiting on the pipes it held, when the group kill came first).
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
      request.killAlso?.();
    };
    const stop = (why: ProcessResult['ending']) => {
      if (ending === 'exited') ending = why;
      // Before the group: once its leader is gone, what it started belongs to init, not to it —
      // and its pid may belong to another process, whose tree is not ours to kill.
      const running = child.exitCode === null && child.signalCode === null;
      if (running && child.pid !== undefined)
        for (const pid of descendants(child.pid)) killQuietly(pid);
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

/** SIGKILL, when the process is still there. */
export function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ESRCH: gone already.
  }
}

/**
 * Every process below `root` in the process tree, parents before their children, read from /proc
 * (Linux; none elsewhere). A snapshot: a process forked after it is read is not in it.
 */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = procStat(pid);
    if (!stat) continue; // exited while we looked
    const ppid = Number(stat[1]);
    const siblings = children.get(ppid);
    if (siblings) siblings.push(pid);
    else children.set(ppid, [pid]);
  }
  const found: number[] = [];
  for (let queue = [root]; queue.length;) {
    const next: number[] = [];
    for (const pid of queue) {
      for (const child of children.get(pid) ?? []) {
        found.push(child);
        next.push(child);
      }
    }
    queue = next;
  }
  return found;
}

/**
 * The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1]); undefined when
 * the process is gone (or there is no /proc).
 */
export function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start past its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}
