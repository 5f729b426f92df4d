import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { CappedBuffer } from './capped-buffer';
import { descendants, killQuietly } from './process-runner';

/** What {@link startLongLived} needs: a launcher argv that execs into bubblewrap, and its clean-up. */
export interface LongLivedStart {
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly passFds?: readonly number[];
  /** Kills what else belongs to the process (its pids cgroup) whenever it is killed. */
  readonly killAlso?: () => void;
  /** Runs once, after the process and its pipes are gone (closes descriptors, removes the cgroup). */
  readonly cleanup: () => Promise<void>;
  /** Bytes of stderr kept for diagnostics (never shown to a tool's caller). */
  readonly maxStderrBytes?: number;
}

/**
 * A sandboxed process left running: a helper that answers requests on its stdio for many calls.
 * Its stdin and stdout are the caller's protocol; stderr is kept, capped, for diagnostics. It dies
 * with the service (`--die-with-parent`), on {@link kill}, and every process it started dies with
 * it (the sandbox's PID namespace and pids cgroup).
 */
export class SandboxedProcess {
  /** Resolves once the process is gone and its clean-up has run. Never rejects. */
  readonly exited: Promise<void>;
  readonly stderr: CappedBuffer;
  private killed = false;

  /** @internal */
  constructor(
    private readonly child: ChildProcessByStdio<Writable, Readable, Readable>,
    private readonly start: LongLivedStart,
  ) {
    this.stderr = new CappedBuffer(start.maxStderrBytes ?? 16 * 1024);
    child.stderr.on('data', (b: Buffer) => this.stderr.push(b));
    // The protocol's writer sees a dead helper through `exited`, not through EPIPE.
    child.stdin.on('error', () => undefined);
    child.once('exit', () => this.killGroup());
    this.exited = new Promise<void>((resolve) => {
      child.once('close', () => {
        void start.cleanup().finally(resolve);
      });
    });
  }

  get stdin(): Writable {
    return this.child.stdin;
  }

  get stdout(): Readable {
    return this.child.stdout;
  }

  /** The process id of bubblewrap on the host (the launcher execs into it). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether it still runs (neither exited nor killed). */
  get alive(): boolean {
    return !this.killed && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Lets the service exit while the helper idles (the helper dies with it); a helper serving a
   * request is kept referenced by that request's pending I/O.
   */
  unref(): void {
    this.child.unref();
    (this.child.stdout as Readable & { unref?: () => void }).unref?.();
    (this.child.stderr as Readable & { unref?: () => void }).unref?.();
    (this.child.stdin as Writable & { unref?: () => void }).unref?.();
  }

  ref(): void {
    this.child.ref();
    (this.child.stdout as Readable & { ref?: () => void }).ref?.();
    (this.child.stderr as Readable & { ref?: () => void }).ref?.();
    (this.child.stdin as Writable & { ref?: () => void }).ref?.();
  }

  /** Kills the whole sandbox (every descendant, the group, the cgroup); resolves when it is gone. */
  kill(): Promise<void> {
    if (!this.killed) {
      this.killed = true;
      const running = this.child.exitCode === null && this.child.signalCode === null;
      if (running && this.child.pid !== undefined)
        for (const pid of descendants(this.child.pid)) killQuietly(pid);
      this.killGroup();
    }
    return this.exited;
  }

  private killGroup(): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // ESRCH: the group is already gone.
    }
    this.start.killAlso?.();
  }
}

/**
 * Starts `start.argv` as a process-group leader with piped stdio and leaves it running. Rejects
 * (after the clean-up) when it cannot be started at all.
 */
export function startLongLived(start: LongLivedStart): Promise<SandboxedProcess> {
  const [program, ...args] = start.argv;
  if (program === undefined) {
    return Promise.reject(new ToolgateError(ErrorCode.Internal, 'startLongLived needs a program'));
  }
  const child = spawn(program, args, {
    cwd: start.cwd,
    env: start.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', ...(start.passFds ?? [])],
  }) as unknown as ChildProcessByStdio<Writable, Readable, Readable>;
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      void start
        .cleanup()
        .finally(() =>
          reject(
            new ToolgateError(
              ErrorCode.ToolFailed,
              `the sandbox could not start: ${err.code ?? 'error'}`,
            ),
          ),
        );
    };
    child.once('error', onError);
    child.once('spawn', () => {
      child.off('error', onError);
      // Later errors (a kill of a process already gone) are not the caller's concern.
      child.on('error', () => undefined);
      resolve(new SandboxedProcess(child, start));
    });
  });
}
