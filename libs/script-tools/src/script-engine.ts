import moduleLoader from '@jitl/quickjs-wasmfile-release-sync/emscripten-module';
import { QuickJSFFI } from '@jitl/quickjs-wasmfile-release-sync/ffi';
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSSyncVariant,
  type QuickJSContext,
  type QuickJSDeferredPromise,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import { ErrorCode, ToolgateError, isErrorCode } from '@toolgate/contracts';

/**
 * The release build of QuickJS with its wasm file beside it, loaded with `require` (the package's
 * own variant object loads it with a dynamic `import()`, which Jest's CommonJS runtime refuses).
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
  // (measured: 512 KiB does, 256 KiB does not); 128 KiB is about 700 nested calls.
  stackBytes: 128 * 1024,
  maxResultBytes: 512 * 1024,
  maxHostCallsInFlight: 8,
});

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
  /** Ends the call (deadline, cancellation): the script is interrupted, its runtime dropped. */
  signal?: AbortSignal;
}

/** `value` on the way out, checked to be JSON: plain objects, arrays, strings, finite numbers. */
const SERIALIZER = `(function () {
  const stringify = JSON.stringify, protoOf = Object.getPrototypeOf, finite = Number.isFinite;
  const OP = Object.prototype, AP = Array.prototype;
  return function (value) {
    return stringify(value === undefined ? null : value, function (key, v) {
      switch (typeof v) {
        case 'string': case 'boolean': case 'undefined': return v;
        case 'number': if (finite(v)) return v; throw new TypeError(String(v) + ' is not a JSON number');
        case 'object': {
          if (v === null) return v;
          const p = protoOf(v);
          if (p === OP || p === AP || p === null) return v;
          const c = p && p.constructor && p.constructor.name;
          throw new TypeError('a ' + (c || 'non-plain object') + ' is not JSON');
        }
        default: throw new TypeError('a ' + typeof v + ' is not JSON');
      }
    });
  };
})()`;

/**
 * Runs scripts in QuickJS compiled to WebAssembly (`quickjs-emscripten`): an interpreter with no
 * Node API at all — no `require`, `process`, `fetch`, timers or file system — whose only way out
 * is the host functions a call is given.
 *
 * Every call gets a fresh QuickJS runtime and context, disposed at its end, so nothing a call does
 * (globals, prototypes, pending jobs) is seen by the next; measured, that costs about 0.1 ms, no
 * more than reusing a pooled runtime with a fresh context, so nothing is pooled but the wasm
 * module. A call's runtime has a heap limit and a stack limit, and an interrupt handler that stops
 * the interpreter once the call's CPU budget is spent or its signal fires (a runaway loop), checked
 * by QuickJS every few thousand instructions. The interpreter runs on the caller's thread: a
 * script's synchronous stretch holds the event loop for at most its CPU budget.
 */
export class ScriptEngine {
  private static shared: Promise<ScriptEngine> | undefined;
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  private constructor(
    private module: QuickJSWASMModule,
    private readonly maxConcurrent: number,
  ) {}

  /** The process's engine (one wasm module, loaded once, about 25 ms). */
  static load(options: { maxConcurrent?: number } = {}): Promise<ScriptEngine> {
    return (ScriptEngine.shared ??= newQuickJSWASMModuleFromVariant(variant).then(
      (module) => new ScriptEngine(module, options.maxConcurrent ?? 16),
    ));
  }

  /**
   * The compile error of a script (message and line), or null when QuickJS compiles it. Nothing
   * of the script runs.
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
          const error = describe(context, result.error);
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
    await this.acquire();
    try {
      return await this.runNow(run);
    } finally {
      this.release();
    }
  }

  private async runNow(run: ScriptRun): Promise<unknown> {
    const limits = { ...DEFAULT_SCRIPT_LIMITS, ...run.limits };
    const signal = run.signal ?? new AbortController().signal;
    if (signal.aborted) throw abortReason(signal);
    const call = new ScriptCall(this.module.newRuntime(), run, limits, signal);
    try {
      return await call.execute();
    } catch (err) {
      if (err instanceof ToolgateError) throw err;
      // The interpreter itself failed (the host's own stack ran out under a deep recursion):
      // the call fails, and its runtime is dropped below.
      throw new ToolgateError(
        ErrorCode.ToolFailed,
        `${run.fileName}: the interpreter failed: ${(err as Error).message}`,
      );
    } finally {
      try {
        call.dispose();
      } catch {
        // A runtime that cannot be freed (QuickJS found objects still alive) leaves the wasm
        // module in a state nobody should run in again: later calls get a new module.
        this.module = await newQuickJSWASMModuleFromVariant(variant);
      }
    }
  }

  private async acquire(): Promise<void> {
    if (this.running < this.maxConcurrent) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}

/** The script as the body of an async function of `params` (line 1 stays line 1). */
function wrap(source: string): string {
  return `(async function (params) {${source}\n})`;
}

/** One call: its runtime and context, the host calls in flight, the CPU spent. */
class ScriptCall {
  private readonly context: QuickJSContext;
  private readonly handles: QuickJSHandle[] = [];
  private readonly pending = new Set<QuickJSDeferredPromise>();
  private readonly ended = new AbortController();
  private cpuUsed = 0;
  private sliceStart = 0;
  private interrupted = false;
  private disposed = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly runtime: QuickJSRuntime,
    private readonly run: ScriptRun,
    private readonly limits: ScriptLimits,
    private readonly signal: AbortSignal,
  ) {
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(limits.stackBytes);
    runtime.setInterruptHandler(() => {
      if (
        this.signal.aborted ||
        this.cpuUsed + (performance.now() - this.sliceStart) > this.limits.cpuMs
      ) {
        this.interrupted = true;
        return true;
      }
      return false;
    });
    this.context = runtime.newContext();
  }

  async execute(): Promise<unknown> {
    const { context } = this;
    const jsonParse = this.keep(
      context.getProp(this.keep(context.getProp(context.global, 'JSON')), 'parse'),
    );
    const serialize = this.keep(
      this.slice(() => this.unwrap(context.evalCode(SERIALIZER, 'toolgate:serialize'))),
    );
    for (const [name, fn] of Object.entries(this.run.host)) {
      const handle = context.newFunction(name, (...args) =>
        this.hostCall(name, fn, args, jsonParse),
      );
      context.setProp(context.global, name, handle);
      handle.dispose();
    }
    const params = this.keep(this.fromJson(jsonParse, this.run.params));
    const fn = this.keep(
      this.slice(() =>
        this.unwrap(context.evalCode(wrap(this.run.source), this.run.fileName, { strict: true })),
      ),
    );
    const promise = this.keep(
      this.slice(() => this.unwrap(context.callFunction(fn, context.undefined, params))),
    );
    for (;;) {
      const jobs = this.slice(() => this.runtime.executePendingJobs());
      if (jobs.error) {
        const error = this.failure(jobs.error);
        jobs.error.dispose();
        throw error;
      }
      jobs.dispose();
      const state = context.getPromiseState(promise);
      if (state.type === 'fulfilled') {
        const value = this.keep(state.value);
        return this.toJson(serialize, value);
      }
      if (state.type === 'rejected') {
        const error = this.failure(state.error);
        state.error.dispose();
        throw error;
      }
      if (this.pending.size === 0) {
        throw new ToolgateError(
          ErrorCode.ToolFailed,
          `${this.run.fileName} waits on a promise nothing will settle (no host call is in flight)`,
        );
      }
      await this.nextSettlement();
      if (this.signal.aborted) throw abortReason(this.signal);
    }
  }

  /** Frees everything of the call; throws when QuickJS cannot free its runtime. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.ended.abort(new ToolgateError(ErrorCode.Cancelled, 'the script finished'));
    for (const deferred of this.pending) deferred.dispose();
    this.pending.clear();
    for (const handle of this.handles) if (handle.alive) handle.dispose();
    this.context.dispose();
    this.runtime.dispose();
  }

  private keep<T extends QuickJSHandle>(handle: T): T {
    this.handles.push(handle);
    return handle;
  }

  /** Runs interpreter work, counting its time against the CPU budget. */
  private slice<T>(work: () => T): T {
    if (this.signal.aborted) throw abortReason(this.signal);
    this.sliceStart = performance.now();
    try {
      return work();
    } finally {
      this.cpuUsed += performance.now() - this.sliceStart;
    }
  }

  private unwrap(result: { error?: QuickJSHandle; value?: QuickJSHandle }): QuickJSHandle {
    if (result.error) {
      const error = this.failure(result.error);
      result.error.dispose();
      throw error;
    }
    return result.value!;
  }

  /** What a script's exception (or the interpreter stopping it) means for the call. */
  private failure(handle: QuickJSHandle): ToolgateError {
    if (this.signal.aborted) return abortReason(this.signal);
    if (this.interrupted) {
      return new ToolgateError(
        ErrorCode.Timeout,
        `${this.run.fileName} ran out of its ${this.limits.cpuMs} ms CPU budget`,
        { details: { limit: 'cpu', cpuMs: this.limits.cpuMs } },
      );
    }
    // Reading a thrown object can run its getters: that is the script's time too.
    let error: ReturnType<typeof describe>;
    try {
      error = this.slice(() => describe(this.context, handle));
    } catch {
      if (this.interrupted || this.signal.aborted) return this.failure(handle);
      return new ToolgateError(
        ErrorCode.ToolFailed,
        `${this.run.fileName} threw something unreadable`,
      );
    }
    if (error.name === 'InternalError' && /out of memory/.test(error.message)) {
      return new ToolgateError(
        ErrorCode.ToolFailed,
        `${this.run.fileName} ran out of memory (limit ${this.limits.memoryBytes} bytes)`,
        { details: { limit: 'memory', memoryBytes: this.limits.memoryBytes } },
      );
    }
    const where = error.line ? ` (${this.run.fileName}:${error.line})` : '';
    return new ToolgateError(
      ErrorCode.ToolFailed,
      `${error.name ? `${error.name}: ` : ''}${error.message || 'the script failed without a message'}${where}`.slice(
        0,
        2000,
      ),
      {
        details: {
          ...(error.code !== undefined ? { hostError: error.code } : {}),
          ...(error.stack ? { stack: error.stack.slice(0, 2000) } : {}),
        },
      },
    );
  }

  /** A host call: a promise in the script, settled when the host function settles. */
  private hostCall(
    name: string,
    fn: HostFunction,
    argHandles: QuickJSHandle[],
    jsonParse: QuickJSHandle,
  ): QuickJSHandle {
    const { context } = this;
    const deferred = context.newPromise();
    if (this.pending.size >= this.limits.maxHostCallsInFlight) {
      const error = this.newError(
        ErrorCode.TooLarge,
        `${name}: more than ${this.limits.maxHostCallsInFlight} host calls in flight`,
      );
      deferred.reject(error);
      error.dispose();
      const handle = deferred.handle.dup();
      deferred.dispose();
      return handle;
    }
    let args: unknown[];
    try {
      args = argHandles.map((h) => this.argument(h));
    } catch (err) {
      const error = this.newError(ErrorCode.InvalidArguments, `${name}: ${(err as Error).message}`);
      deferred.reject(error);
      error.dispose();
      const handle = deferred.handle.dup();
      deferred.dispose();
      return handle;
    }
    this.pending.add(deferred);
    const settle = (apply: () => void) => {
      if (this.disposed || !this.pending.has(deferred)) return;
      this.pending.delete(deferred);
      try {
        apply();
      } finally {
        deferred.dispose();
        this.nudge();
      }
    };
    void Promise.resolve()
      .then(() => fn(args, this.ended.signal))
      .then(
        (value) =>
          settle(() => {
            let handle: QuickJSHandle;
            try {
              handle = this.fromJson(jsonParse, value);
            } catch (err) {
              const error = this.newError(
                ErrorCode.ToolFailed,
                `${name}: ${(err as Error).message}`,
              );
              deferred.reject(error);
              error.dispose();
              return;
            }
            deferred.resolve(handle);
            handle.dispose();
          }),
        (err: unknown) =>
          settle(() => {
            const code = (err as { code?: unknown }).code;
            const message = err instanceof Error ? err.message : String(err);
            const error = this.newError(
              isErrorCode(code) ? code : ErrorCode.ToolFailed,
              `${name}: ${message}`,
            );
            deferred.reject(error);
            error.dispose();
          }),
      );
    return deferred.handle.dup();
  }

  /** A host call's argument as JSON (strings, numbers, booleans, null, plain data). */
  private argument(handle: QuickJSHandle): unknown {
    const type = this.context.typeof(handle);
    switch (type) {
      case 'string':
        return this.context.getString(handle);
      case 'number':
        return this.context.getNumber(handle);
      case 'boolean':
      case 'undefined':
      case 'object':
        return this.context.dump(handle) as unknown;
      default:
        throw new TypeError(`a ${type} cannot be passed to a host function`);
    }
  }

  private newError(code: ErrorCode, message: string): QuickJSHandle {
    const error = this.context.newError({ name: 'HostCallError', message });
    const codeHandle = this.context.newString(code);
    this.context.setProp(error, 'code', codeHandle);
    codeHandle.dispose();
    return error;
  }

  /** A host value inside the context, through the context's own (untampered) `JSON.parse`. */
  private fromJson(jsonParse: QuickJSHandle, value: unknown): QuickJSHandle {
    const text = this.context.newString(JSON.stringify(value === undefined ? null : value));
    try {
      return this.slice(() =>
        this.unwrap(this.context.callFunction(jsonParse, this.context.undefined, text)),
      );
    } finally {
      text.dispose();
    }
  }

  private toJson(serialize: QuickJSHandle, value: QuickJSHandle): unknown {
    const result = this.slice(() =>
      this.context.callFunction(serialize, this.context.undefined, value),
    );
    if (result.error) {
      if (this.interrupted || this.signal.aborted) {
        const failure = this.failure(result.error);
        result.error.dispose();
        throw failure;
      }
      const error = describe(this.context, result.error);
      result.error.dispose();
      throw new ToolgateError(
        ErrorCode.NonSerializableResult,
        `${this.run.fileName} returned a value that is not JSON: ${error.message}`,
      );
    }
    const text = this.context.getString(result.value);
    result.value.dispose();
    if (
      text.length > this.limits.maxResultBytes ||
      Buffer.byteLength(text) > this.limits.maxResultBytes
    ) {
      throw new ToolgateError(
        ErrorCode.TooLarge,
        `${this.run.fileName} returned ${Buffer.byteLength(text)} bytes of JSON, over the ${this.limits.maxResultBytes}-byte limit`,
      );
    }
    return JSON.parse(text) as unknown;
  }

  private nudge(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private nextSettlement(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.signal.removeEventListener('abort', done);
        resolve();
      };
      this.wake = done;
      this.signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** An exception's name, message, line, stack and host `code`, read without running script code. */
function describe(
  context: QuickJSContext,
  handle: QuickJSHandle,
): { name: string; message: string; line?: number; stack?: string; code?: string } {
  const dumped = context.dump(handle) as unknown;
  if (typeof dumped !== 'object' || dumped === null) return { name: '', message: String(dumped) };
  const e = dumped as { name?: unknown; message?: unknown; stack?: unknown; code?: unknown };
  const stack = typeof e.stack === 'string' ? e.stack : undefined;
  const line = stack ? /:(\d+)(?::\d+)?\)?\s*$/m.exec(stack.split('\n')[0] ?? '')?.[1] : undefined;
  return {
    name: typeof e.name === 'string' ? e.name : '',
    message: typeof e.message === 'string' ? e.message : JSON.stringify(dumped),
    ...(line ? { line: Number(line) } : {}),
    ...(stack ? { stack } : {}),
    ...(typeof e.code === 'string' ? { code: e.code } : {}),
  };
}

function abortReason(signal: AbortSignal): ToolgateError {
  const reason: unknown = signal.reason;
  if (reason instanceof ToolgateError) return reason;
  return new ToolgateError(ErrorCode.Cancelled, 'the script call was cancelled');
}
