import { performance } from 'node:perf_hooks';

/** Raised when a hook or canUseTool misses its deadline. */
export class HookTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = 'HookTimeoutError';
  }
}

interface Pending {
  readonly due: number;
  readonly reject: (err: Error) => void;
  done: boolean;
}

/**
 * Deadlines for one timeout value. Calls join in order, so their deadlines are in order too: one
 * timer for the queue's head replaces a timer per call (a timer per call halves the throughput of
 * a chain with an async hook). Settled entries leave the head eagerly, so the queue stays short.
 */
class DeadlineQueue {
  private readonly queue: Pending[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(private readonly timeoutMs: number) {}

  add(reject: (err: Error) => void): Pending {
    const entry: Pending = { due: performance.now() + this.timeoutMs, reject, done: false };
    this.queue.push(entry);
    if (this.timer === undefined) this.arm(this.timeoutMs);
    return entry;
  }

  settle(entry: Pending): void {
    entry.done = true;
    this.drain();
  }

  private drain(): void {
    const q = this.queue;
    while (this.head < q.length && q[this.head]!.done) this.head++;
    if (this.head === q.length) {
      q.length = 0;
      this.head = 0;
    } else if (this.head > 1_024 && this.head * 2 > q.length) {
      q.splice(0, this.head);
      this.head = 0;
    }
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.ceil(ms)));
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = undefined;
    const now = performance.now();
    const q = this.queue;
    while (this.head < q.length) {
      const entry = q[this.head]!;
      if (!entry.done) {
        if (entry.due > now) break;
        entry.done = true;
        entry.reject(new HookTimeoutError(this.timeoutMs));
      }
      this.head++;
    }
    this.drain();
    if (this.head < q.length) this.arm(q[this.head]!.due - now);
  }
}

const queues = new Map<number, DeadlineQueue>();

/** Resolves with `promise`, or rejects with {@link HookTimeoutError} after `timeoutMs`. */
export function withDeadline<T>(promise: PromiseLike<T>, timeoutMs: number): Promise<T> {
  let queue = queues.get(timeoutMs);
  if (queue === undefined) queues.set(timeoutMs, (queue = new DeadlineQueue(timeoutMs)));
  const q = queue;
  return new Promise<T>((resolve, reject) => {
    const entry = q.add(reject);
    promise.then(
      (v) => {
        if (entry.done) return;
        q.settle(entry);
        resolve(v);
      },
      (e: unknown) => {
        if (entry.done) return;
        q.settle(entry);
        reject(e);
      },
    );
  });
}
