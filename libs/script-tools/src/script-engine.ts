import moduleLoader from '@jitl/quickjs-wasmfile-release-sync/emscripten-module';
import { QuickJSFFI } from '@jitl/quickjs-wasmfile-release-sync/ffi';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSSyncVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import { ErrorCode, ToolgateError, isErrorCode } from '@toolgate/contracts';
import {
  scriptWorkerMain,
  type FromScriptWorker,
  type ScriptWorkerData,
  type ToScriptWorker,
} from './script-worker';

/**
 * The release build of QuickJS with its wasm file beside it, loaded with `require` (the package's
 * own variant object loads it with a dynamic `import()`, which Jest's CommonJS runtime refuses).
 * This thread loads it only to compile scripts (`syntaxError`); calls run in workers.
 */
const variant: QuickJSSyncVariant = {
  type: 'sync',
  importFFI: () => Promise.resolve(QuickJSFFI),
  importModuleLoader: () => Promise.resolve(moduleLoader),
};

/** What one script call may use. */
export interface ScriptLimits {
  /** Heap of the call's QuickJS runtime, in bytes. */
  memoryBytes: number;
  /** Time the call may spend running in the interpreter, summed over its slices, in ms. */
  cpuMs: number;
  /** The interpreter's stack, in bytes (deep recursion is a RangeError the script sees). */
  stackBytes: number;
  /** The largest result, as JSON, in bytes. */
  maxResultBytes: number;
  /** Host calls one script may have in flight at once (further calls reject). */
  maxHostCallsInFlight: number;
}

const DEFAULT_SCRIPT_LIMITS: Readonly<ScriptLimits> = Object.freeze({
  memoryBytes: 64 * 1024 * 1024,
  cpuMs: 1000,
  // Deeper than this, the wasm frames of QuickJS's recursion would reach V8's own stack limit first
  // (measured on the main thread: 512 KiB does, 256 KiB does not); 128 KiB is about 700 nested calls.
  stackBytes: 128 * 1024,
  maxResultBytes: 512 * 1024,
  maxHostCallsInFlight: 8,
});

/**
 * Past its CPU budget by this much, a call the interpreter's own interrupt did not stop (QuickJS
 * checks it between instructions, not inside one allocation that grows the heap) is killed with
 * its thread.
 */
const WATCHDOG_GRACE_MS = 50;
/** After a deadline or a cancel, how long a worker may take to stop by itself before it is killed. */
const STOP_GRACE_MS = 50;
/**
 * The V8 heap of a worker, beside the QuickJS heap (wasm memory, bounded by `memoryBytes`): what
 * the worker's own JavaScript holds — a call's source, input, host answers and result as text.
 */
const WORKER_RESOURCE_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 };

/**
 * A host function as a script sees it: called with the script's arguments (as JSON values), it
 * answers a JSON value, or throws — a `ToolgateError`'s code reaches the script as `error.code`.
 * The signal fires when the call ends (deadline, cancellation, the script finished).
 */
export type HostFunction = (args: unknown[], signal: AbortSignal) => Promise<unknown>;

/** One call of a script. */
export interface ScriptRun {
  /** The script's source: the body of `async function (params) { … }`. */
  source: string;
  /** For stack traces: `<tool>.js`. */
  fileName: string;
  /** The validated input, bound to `params`. */
  params: unknown;
  /** The host functions the script may call, by global name; nothing else is defined. */
  host: Readonly<Record<string, HostFunction>>;
  limits?: Partial<ScriptLimits>;
  /** Ends the call (deadline, cancellation): the script is stopped, its worker killed if need be. */
  signal?: AbortSignal;
}

export interface ScriptEngineOptions {
  /** Calls running at once, each in its own worker thread; more wait. Default 16. */
  maxConcurrent?: number;
  /** Workers kept warm between calls. Default 2. */
  maxIdle?: number;
  /**
   * The nice value of the worker threads (Linux; 0–19): under CPU contention the executor's own
   * thread, and so every other call, is scheduled before a script. Default 10.
   */
  workerNice?: number;
}

/**
 * Runs scripts in QuickJS compiled to WebAssembly (`quickjs-emscripten`): an interpreter with no
 * Node API at all — no `require`, `process`, `fetch`, timers or file system — whose only way out
 * is the host functions a call is given.
 *
 * A call runs in a worker thread (`script-worker.ts`), off this thread's event loop: whatever the
 * script does — spin, grow its heap, recurse — this thread keeps serving other calls. Workers are
 * pooled (a few are kept warm; a fresh one costs tens of ms) and each call gets a fresh QuickJS
 * runtime and context in its worker, disposed at its end, so nothing a call does is seen by the
 * next. A call's runtime has a heap limit, a stack limit and an interrupt handler that stops the
 * interpreter once the CPU budget is spent or the call was stopped; the worker's V8 heap has its
 * own limit. Behind the interrupt, this thread watches the CPU the call has spent (a clock the
 * worker keeps in shared memory) and kills the worker when the script is past its budget, as it
 * does when the call's deadline passes or it is cancelled and the worker does not stop at once.
 * A killed worker is replaced. Host functions run on this thread, with their own checks; the
 * worker only forwards a script's arguments and the answer.
 */
export class ScriptEngine {
  private static shared: Promise<ScriptEngine> | undefined;
  private readonly idle: ScriptWorker[] = [];
  private readonly waiting: { take(worker: ScriptWorker): void }[] = [];
  /** Workers alive or starting. */
  private workers = 0;
  private workerData: Promise<Omit<ScriptWorkerData, 'control'>> | undefined;

  private constructor(
    private readonly module: QuickJSWASMModule,
    private readonly maxConcurrent: number,
    private readonly maxIdle: number,
    private readonly workerNice: number,
  ) {}

  /** The process's engine (one wasm module for compiling, loaded once, about 25 ms). */
  static load(options: ScriptEngineOptions = {}): Promise<ScriptEngine> {
    return (ScriptEngine.shared ??= newQuickJSWASMModuleFromVariant(variant).then(
      (module) =>
        new ScriptEngine(
          module,
          options.maxConcurrent ?? 16,
          Math.max(0, options.maxIdle ?? 2),
          Math.min(19, Math.max(0, options.workerNice ?? 10)),
        ),
    ));
  }

  /** Starts workers until `count` are warm (a service calls it at start-up). */
  async warm(count = 1): Promise<void> {
    const started: Promise<ScriptWorker>[] = [];
    while (this.idle.length + started.length < Math.min(count, this.maxIdle)) {
      if (this.workers >= this.maxConcurrent) break;
      started.push(this.spawn());
    }
    for (const worker of await Promise.all(started)) this.release(worker);
  }

  /** Workers alive or starting, and how many of them are idle (for tests and metrics). */
  get poolSize(): { workers: number; idle: number } {
    return { workers: this.workers, idle: this.idle.length };
  }

  /**
   * The compile error of a script (message and line), or null when QuickJS compiles it. Nothing
   * of the script runs (compiling is linear in the source's size, on this thread).
   */
  syntaxError(source: string, fileName: string): string | null {
    const runtime = this.module.newRuntime();
    try {
      runtime.setMemoryLimit(DEFAULT_SCRIPT_LIMITS.memoryBytes);
      runtime.setMaxStackSize(DEFAULT_SCRIPT_LIMITS.stackBytes);
      const context = runtime.newContext();
      try {
        const result = context.evalCode(wrap(source), fileName, {
          compileOnly: true,
          strict: true,
        });
        if (result.error) {
          const error = compileError(context, result.error);
          result.error.dispose();
          return error.line ? `${error.message} (${fileName}:${error.line})` : error.message;
        }
        result.value.dispose();
        return null;
      } finally {
        context.dispose();
      }
    } finally {
      runtime.dispose();
    }
  }

  /**
   * Runs one call and returns the script's result as JSON (`undefined` is `null`). Throws a
   * `ToolgateError`: `tool-failed` when the script throws (its message, and `details.limit` when a
   * limit stopped it: `memory`), `timeout` when it spent its CPU budget, `non-serializable-result`
   * when it returns what JSON cannot carry, `too-large` for a result over the limit, and the
   * signal's reason when the signal fired.
   */
  async run(run: ScriptRun): Promise<unknown> {
    const limits = { ...DEFAULT_SCRIPT_LIMITS, ...run.limits };
    const signal = run.signal ?? new AbortController().signal;
    if (signal.aborted) throw abortReason(signal);
    const params = JSON.stringify(run.params === undefined ? null : run.params);
    const worker = await this.acquire(signal);
    if (signal.aborted) {
      // Ended while a worker started: the worker goes back unused.
      this.release(worker);
      throw abortReason(signal);
    }
    return worker.execute(run, limits, params, signal);
  }

  private async acquire(signal: AbortSignal): Promise<ScriptWorker> {
    const idle = this.idle.pop();
    if (idle) return idle;
    if (this.workers < this.maxConcurrent) return this.spawn();
    return new Promise<ScriptWorker>((resolve, reject) => {
      const waiter = {
        take: (worker: ScriptWorker) => {
          signal.removeEventListener('abort', onAbort);
          resolve(worker);
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(abortReason(signal));
      };
      this.waiting.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async spawn(): Promise<ScriptWorker> {
    this.workers++;
    try {
      this.workerData ??= workerData(this.workerNice);
      const worker = new ScriptWorker(await this.workerData, {
        free: (w) => this.release(w),
        gone: (started) => this.gone(started),
      });
      await worker.ready;
      return worker;
    } catch (err) {
      this.workerData = undefined;
      throw new ToolgateError(ErrorCode.Unavailable, 'a script worker could not start', {
        cause: err,
      });
    }
  }

  /** A worker that finished its call: to the next waiting call, kept warm, or stopped. */
  private release(worker: ScriptWorker): void {
    const next = this.waiting.shift();
    if (next) next.take(worker);
    else if (this.idle.length < this.maxIdle) this.idle.push(worker);
    else worker.kill();
  }

  /**
   * A worker died (killed, crashed, out of memory): its place is free, and a new one takes it when
   * calls wait or none is warm — unless the dead one never started (no loop of failing starts).
   */
  private gone(started: boolean): void {
    this.workers--;
    for (let i = this.idle.length - 1; i >= 0; i--)
      if (!this.idle[i]!.alive) this.idle.splice(i, 1);
    if (!started || this.maxIdle === 0) return;
    if (this.waiting.length > 0 || this.idle.length === 0) {
      if (this.workers >= this.maxConcurrent) return;
      this.spawn().then(
        (worker) => this.release(worker),
        () => undefined,
      );
    }
  }
}

/** The call a worker is running, as this thread follows it. */
interface ActiveCall {
  id: number;
  run: ScriptRun;
  ended: AbortController;
  settle(outcome: { ok: true; value: unknown } | { ok: false; error: ToolgateError }): void;
}

let nextCallId = 0;

/** One worker thread and the call it runs, seen from the executor's thread. */
class ScriptWorker {
  readonly ready: Promise<void>;
  alive = true;
  private started = false;
  private readonly thread: Worker;
  private readonly stopFlag: Int32Array;
  private readonly clock: Float64Array;
  private active: ActiveCall | undefined;
  /** A call that was stopped and whose worker has not reported yet. */
  private stopping: { id: number; timer: NodeJS.Timeout } | undefined;

  constructor(
    data: Omit<ScriptWorkerData, 'control'>,
    private readonly pool: { free(worker: ScriptWorker): void; gone(started: boolean): void },
  ) {
    const control = new SharedArrayBuffer(24);
    this.stopFlag = new Int32Array(control, 0, 1);
    this.clock = new Float64Array(control, 8, 2);
    this.thread = new Worker(`(${String(scriptWorkerMain)})();`, {
      eval: true,
      workerData: { ...data, control } satisfies ScriptWorkerData,
      resourceLimits: WORKER_RESOURCE_LIMITS,
      // Nothing of the service's environment or flags (a `--require` of a TypeScript loader):
      // the worker needs neither, and QuickJS could not read them anyway.
      env: {},
      execArgv: [],
    });
    this.ready = new Promise<void>((resolve, reject) => {
      const onMessage = (message: FromScriptWorker) => {
        if (message.t !== 'ready') return;
        this.thread.off('message', onMessage);
        this.thread.off('exit', onExit);
        this.started = true;
        // Idle from now on: an idle worker does not hold the process open (a call refs it).
        this.thread.unref();
        resolve();
      };
      const onExit = () => reject(new Error('the script worker exited while starting'));
      this.thread.on('message', onMessage);
      this.thread.once('exit', onExit);
    });
    this.ready.catch(() => undefined);
    this.thread.on('message', (message: FromScriptWorker) => this.onMessage(message));
    this.thread.on('error', (err: Error & { code?: string }) => {
      this.active?.settle({
        ok: false,
        error:
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? new ToolgateError(
                ErrorCode.ToolFailed,
                `${this.active.run.fileName} ran out of memory (the worker's heap)`,
                { details: { limit: 'memory' } },
              )
            : new ToolgateError(
                ErrorCode.ToolFailed,
                `${this.active.run.fileName}: the interpreter failed`,
              ),
      });
    });
    this.thread.once('exit', () => {
      this.alive = false;
      if (this.stopping) clearTimeout(this.stopping.timer);
      this.active?.settle({
        ok: false,
        error: new ToolgateError(
          ErrorCode.ToolFailed,
          `${this.active.run.fileName}: the interpreter stopped`,
        ),
      });
      this.pool.gone(this.started);
    });
  }

  /** Runs one call in this worker; the worker goes back to the pool when the call is over. */
  execute(
    run: ScriptRun,
    limits: ScriptLimits,
    params: string,
    signal: AbortSignal,
  ): Promise<unknown> {
    const id = ++nextCallId;
    return new Promise<unknown>((resolve, reject) => {
      let watchdog: NodeJS.Timeout | undefined;
      const onAbort = () => {
        call.settle({ ok: false, error: abortReason(signal) });
        this.stop(id);
      };
      const call: ActiveCall = {
        id,
        run,
        ended: new AbortController(),
        settle: (outcome) => {
          if (this.active !== call) return;
          this.active = undefined;
          clearTimeout(watchdog);
          signal.removeEventListener('abort', onAbort);
          call.ended.abort(new ToolgateError(ErrorCode.Cancelled, 'the script finished'));
          if (outcome.ok) resolve(outcome.value);
          else reject(outcome.error);
        },
      };
      // Read the worker's clock: kill it once the script is past its budget by the grace.
      const check = () => {
        const inSlice = this.clock[1]!;
        const spent = this.clock[0]! + (inSlice > 0 ? now() - inSlice : 0);
        const left = limits.cpuMs + WATCHDOG_GRACE_MS - spent;
        if (left > 0) {
          watchdog = setTimeout(check, Math.max(left, 5));
          return;
        }
        call.settle({
          ok: false,
          error: new ToolgateError(
            ErrorCode.Timeout,
            `${run.fileName} ran out of its ${limits.cpuMs} ms CPU budget`,
            { details: { limit: 'cpu', cpuMs: limits.cpuMs } },
          ),
        });
        this.kill();
      };
      this.active = call;
      Atomics.store(this.stopFlag, 0, 0);
      this.clock[0] = 0;
      this.clock[1] = 0;
      this.thread.ref();
      watchdog = setTimeout(check, limits.cpuMs + WATCHDOG_GRACE_MS);
      signal.addEventListener('abort', onAbort, { once: true });
      this.thread.postMessage({
        t: 'run',
        id,
        source: run.source,
        fileName: run.fileName,
        params,
        host: Object.keys(run.host),
        limits,
      } satisfies ToScriptWorker);
    });
  }

  /** Stops the thread now, whatever it runs. */
  kill(): void {
    if (!this.alive) return;
    this.alive = false;
    this.thread.unref();
    void this.thread.terminate();
  }

  /** Asks the worker to stop call `id` (its interrupt reads the flag); kills it if it does not. */
  private stop(id: number): void {
    if (!this.alive) return;
    Atomics.store(this.stopFlag, 0, 1);
    this.thread.postMessage({ t: 'stop', id } satisfies ToScriptWorker);
    this.stopping = { id, timer: setTimeout(() => this.kill(), STOP_GRACE_MS) };
  }

  private onMessage(message: FromScriptWorker): void {
    switch (message.t) {
      case 'host':
        if (this.active?.id === message.id) this.host(this.active, message);
        return;
      case 'done': {
        const call = this.active;
        if (call?.id === message.id) {
          if (message.ok) {
            call.settle({ ok: true, value: JSON.parse(message.json) as unknown });
          } else {
            call.settle({
              ok: false,
              error: new ToolgateError(
                isErrorCode(message.code) ? message.code : ErrorCode.ToolFailed,
                message.message,
                message.details ? { details: message.details } : {},
              ),
            });
          }
        } else if (this.stopping?.id === message.id) {
          clearTimeout(this.stopping.timer);
        } else {
          return;
        }
        this.stopping = undefined;
        if (message.retire || !this.alive) {
          this.kill();
          return;
        }
        this.thread.unref();
        this.pool.free(this);
        return;
      }
      case 'ready':
        return;
    }
  }

  /** Runs a script's host call here, with the host function's own checks, and answers it. */
  private host(call: ActiveCall, message: Extract<FromScriptWorker, { t: 'host' }>): void {
    const { hid, name } = message;
    const answer = (reply: ToScriptWorker) => {
      if (this.active === call && this.alive) this.thread.postMessage(reply);
    };
    const fail = (code: ErrorCode, text: string) =>
      answer({ t: 'host', id: call.id, hid, ok: false, code, message: `${name}: ${text}` });
    const fn = Object.hasOwn(call.run.host, name) ? call.run.host[name] : undefined;
    if (!fn || !Array.isArray(message.args)) {
      fail(ErrorCode.Denied, 'not a host function of this script');
      return;
    }
    void Promise.resolve()
      .then(() => fn(message.args, call.ended.signal))
      .then(
        (value) => {
          let json: string;
          try {
            json = JSON.stringify(value === undefined ? null : value);
          } catch (err) {
            fail(ErrorCode.ToolFailed, (err as Error).message);
            return;
          }
          answer({ t: 'host', id: call.id, hid, ok: true, json });
        },
        (err: unknown) => {
          const code = (err as { code?: unknown } | undefined)?.code;
          fail(
            isErrorCode(code) ? code : ErrorCode.ToolFailed,
            err instanceof Error ? err.message : String(err),
          );
        },
      );
  }
}

/** Node's WebAssembly global (the ES2023 lib does not type it). */
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<object> };

/** What every worker starts with: where QuickJS is, QuickJS compiled, the error codes. */
async function workerData(nice: number): Promise<Omit<ScriptWorkerData, 'control'>> {
  const loader = require.resolve('@jitl/quickjs-wasmfile-release-sync/emscripten-module');
  return {
    paths: {
      core: require.resolve('quickjs-emscripten-core'),
      ffi: require.resolve('@jitl/quickjs-wasmfile-release-sync/ffi'),
      loader,
    },
    wasm: await WebAssembly.compile(
      await readFile(path.join(path.dirname(loader), 'emscripten-module.wasm')),
    ),
    codes: ErrorCode,
    nice,
  };
}

function now(): number {
  return performance.timeOrigin + performance.now();
}

/** The script as the body of an async function of `params` (line 1 stays line 1, as in the worker). */
function wrap(source: string): string {
  return `(async function (params) {${source}\n})`;
}

/** A compile error's message and line. */
function compileError(
  context: QuickJSContext,
  handle: QuickJSHandle,
): { message: string; line?: number } {
  const dumped = context.dump(handle) as unknown;
  if (typeof dumped !== 'object' || dumped === null) return { message: String(dumped) };
  const e = dumped as { message?: unknown; stack?: unknown };
  const stack = typeof e.stack === 'string' ? e.stack : undefined;
  const line = stack ? /:(\d+)(?::\d+)?\)?\s*$/m.exec(stack.split('\n')[0] ?? '')?.[1] : undefined;
  return {
    message: typeof e.message === 'string' ? e.message : JSON.stringify(dumped),
    ...(line ? { line: Number(line) } : {}),
  };
}

function abortReason(signal: AbortSignal): ToolgateError {
  const reason: unknown = signal.reason;
  if (reason instanceof ToolgateError) return reason;
  return new ToolgateError(ErrorCode.Cancelled, 'the script call was cancelled');
}
