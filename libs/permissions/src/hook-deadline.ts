import { performance } from 'node:perf_hooks';

/** Raised when a hook or canUseTool misses its deadline. */
export class HookTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = 'HookTimeoutError';
  }
}

/** A pending deadline: `expire` runs once, when it is due and nobody settled it first. */
export interface Deadline {
  readonly due: number;
  readonly expire: (err: HookTimeoutError) => void;
  readonly queue: DeadlineQueue;
  done: boolean;
}

/**
 * Deadlines for one timeout value. Calls join in order, so their deadlines are in order too: one
 * timer for the queue's head replaces a timer per call (a timer per call halves the throughput of
 * a chain with an async hook). Settled entries leave the head eagerly, so the queue stays short.
 */
class DeadlineQueue {
  private readonly queue: Deadline[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(private readonly timeoutMs: number) {}

  add(expire: (err: HookTimeoutError) => void): Deadline {
    const entry: Deadline = {
      due: performance.now() + this.timeoutMs,
      expire,
      queue: this,
      done: false,
    };
    this.queue.push(entry);
    if (this.timer === undefined) this.arm(this.timeoutMs);
    return entry;
  }

  settle(entry: Deadline): void {
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
        entry.expire(new HookTimeoutError(this.timeoutMs));
      }
      this.head++;
    }
    this.drain();
    if (this.head < q.length) this.arm(q[this.head]!.due - now);
  }
}

const queues = new Map<number, DeadlineQueue>();

function queueFor(timeoutMs: number): DeadlineQueue {
  let queue = queues.get(timeoutMs);
  if (queue === undefined) queues.set(timeoutMs, (queue = new DeadlineQueue(timeoutMs)));
  return queue;
}

/**
 * Starts a deadline: `expire` is called with a {@link HookTimeoutError} after `timeoutMs` unless
 * {@link settleDeadline} comes first. The evaluator uses it to race a hook's promise without
 * wrapping it in a promise of its own.
 */
export function startDeadline(
  timeoutMs: number,
  expire: (err: HookTimeoutError) => void,
): Deadline {
  return queueFor(timeoutMs).add(expire);
}

/** Stops a deadline; false when it had already expired (or was settled), so the answer is late. */
export function settleDeadline(deadline: Deadline): boolean {
  if (deadline.done) return false;
  deadline.queue.settle(deadline);
  return true;
}
