/* eslint-disable @typescript-eslint/no-require-imports */
import type { ErrorCode } from '@toolgate/contracts';
import type {
  QuickJSContext,
  QuickJSDeferredPromise,
  QuickJSHandle,
  QuickJSRuntime,
  QuickJSSyncVariant,
} from 'quickjs-emscripten-core';
import type { ScriptLimits } from './script-engine';
/**
 * What a script worker is started with. `control` is shared with the executor's thread:
 * `Int32Array(control, 0, 1)` is the stop flag the executor raises (the interpreter's interrupt
 * handler reads it), `Float64Array(control, 8, 2)` the CPU the current call has spent before its
 * current slice and the slice's start (epoch ms, 0 outside a slice), which the executor's watchdog
 * reads without asking the worker — a worker stuck inside one allocation answers no message.
 */
export interface ScriptWorkerData {
  paths: { core: string; ffi: string; loader: string };
  /** The worker thread's nice value (Linux): under CPU contention the service's threads go first. */
  nice: number;
  /** QuickJS compiled once by the executor's thread: a worker instantiates it, it does not compile it. */
  wasm: object;
  codes: typeof ErrorCode;
  control: SharedArrayBuffer;
}

/** The executor's thread to the worker. */
export type ToScriptWorker =
  | {
      t: 'run';
      id: number;
      source: string;
      fileName: string;
      /** The validated input as JSON text. */
      params: string;
      /** The host functions to define, by global name. */
      host: string[];
      limits: ScriptLimits;
    }
  | { t: 'host'; id: number; hid: number; ok: true; json: string }
  | { t: 'host'; id: number; hid: number; ok: false; code: string; message: string }
  /** Wakes a call waiting on its host calls after the stop flag was raised. */
  | { t: 'stop'; id: number };

/** The worker to the executor's thread. */
export type FromScriptWorker =
  | { t: 'ready' }
  | { t: 'host'; id: number; hid: number; name: string; args: unknown[] }
  | { t: 'done'; id: number; ok: true; json: string; retire?: boolean }
  | {
      t: 'done';
      id: number;
      ok: false;
      code: string;
      message: string;
      details?: Record<string, unknown>;
      /** The interpreter may be in a state nobody should run in again: replace the worker. */
      retire?: boolean;
    };

/**
 * The whole program of a script worker thread. It is sent to the thread as its source text
 * (`String(scriptWorkerMain)`, already compiled from TypeScript by whatever loaded this module:
 * tsc, swc under jest or `npm start`), so it references nothing outside its own body but Node's
 * globals: types only are imported above, and the packages it loads come as absolute paths in
 * `workerData`.
 *
 * The worker loads QuickJS (compiled to WebAssembly) once and runs one call at a time, each in a
 * fresh QuickJS runtime and context disposed at its end, so nothing a call does (globals,
 * prototypes, pending jobs) is seen by the next. Host functions are proxies: a call posts its
 * arguments to the executor's thread, which runs the real host function there, with its checks,
 * and posts the answer back.
 */
export function scriptWorkerMain(): void {
  const { parentPort, workerData } =
    require('node:worker_threads') as typeof import('node:worker_threads');
  const data = workerData as ScriptWorkerData;
  // Lower this thread's scheduling priority (setpriority on a Linux thread id applies to that
  // thread alone): a script spinning here yields the cores to the service's own threads first.
  // Best effort: elsewhere, or refused, the thread keeps the process's priority.
  try {
    const fs = require('node:fs') as typeof import('node:fs');
    const os = require('node:os') as typeof import('node:os');
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, data.nice);
  } catch {
    // Not Linux, or no /proc: nothing to lower.
  }
  const Code = data.codes;
  const port = parentPort!;
  const stopFlag = new Int32Array(data.control, 0, 1);
  const clock = new Float64Array(data.control, 8, 2);
  const now = () => performance.timeOrigin + performance.now();
  const core = require(data.paths.core) as typeof import('quickjs-emscripten-core');
  const ffi = require(data.paths.ffi) as { QuickJSFFI: unknown };
  const loader = require(data.paths.loader) as unknown;
  const variant = core.newVariant(
    {
      type: 'sync',
      importFFI: () => Promise.resolve(ffi.QuickJSFFI),
      importModuleLoader: () => Promise.resolve(loader),
    } as unknown as QuickJSSyncVariant,
    { wasmModule: data.wasm as never },
  );

  /** A call's failure as the executor settles it: a stable code, a message, details. */
  class Failure extends Error {
    constructor(
      readonly code: string,
      message: string,
      readonly details?: Record<string, unknown>,
    ) {
      super(message);
    }
  }

  const stopped = () => new Failure(Code.Cancelled, 'the script call was stopped');
  const isStopped = () => Atomics.load(stopFlag, 0) === 1;

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

  /** The script as the body of an async function of `params` (line 1 stays line 1). */
  const wrap = (source: string) => `(async function (params) {${source}\n})`;

  /**
   * `context.dump` of a copy of `handle`: dumping a promise disposes the handle it is given, and
   * the caller disposes its own after (a thrown promise failed the whole worker, "Lifetime not
   * alive", and the pool replaced it).
   */
  function dumpCopy(context: QuickJSContext, handle: QuickJSHandle): unknown {
    const copy = handle.dup();
    try {
      return context.dump(copy) as unknown;
    } finally {
      if (copy.alive) copy.dispose();
    }
  }

  /** An exception's name, message, line, stack and host `code`, read without running script code. */
  function describe(
    context: QuickJSContext,
    handle: QuickJSHandle,
  ): { name: string; message: string; line?: number; stack?: string; code?: string } {
    const dumped = dumpCopy(context, handle);
    if (typeof dumped !== 'object' || dumped === null) return { name: '', message: String(dumped) };
    const e = dumped as { name?: unknown; message?: unknown; stack?: unknown; code?: unknown };
    const stack = typeof e.stack === 'string' ? e.stack : undefined;
    const line = stack
      ? /:(\d+)(?::\d+)?\)?\s*$/m.exec(stack.split('\n')[0] ?? '')?.[1]
      : undefined;
    return {
      name: typeof e.name === 'string' ? e.name : '',
      message: typeof e.message === 'string' ? e.message : JSON.stringify(dumped),
      ...(line ? { line: Number(line) } : {}),
      ...(stack ? { stack } : {}),
      ...(typeof e.code === 'string' ? { code: e.code } : {}),
    };
  }

  /** One call: its runtime and context, the host calls in flight, the CPU spent. */
  class ScriptCall {
    private readonly context: QuickJSContext;
    private readonly handles: QuickJSHandle[] = [];
    private readonly pending = new Map<
      number,
      { deferred: QuickJSDeferredPromise; name: string }
    >();
    /** The context's own `JSON.parse`, kept before the script could replace it. */
    private parse: QuickJSHandle | undefined;
    private nextHostId = 0;
    private cpuUsed = 0;
    private sliceStart = 0;
    private interrupted = false;
    private disposed = false;
    private wake: (() => void) | undefined;

    constructor(
      private readonly runtime: QuickJSRuntime,
      readonly run: Extract<ToScriptWorker, { t: 'run' }>,
    ) {
      const { limits } = run;
      runtime.setMemoryLimit(limits.memoryBytes);
      runtime.setMaxStackSize(limits.stackBytes);
      runtime.setInterruptHandler(() => {
        if (isStopped() || this.cpuUsed + (now() - this.sliceStart) > limits.cpuMs) {
          this.interrupted = true;
          return true;
        }
        return false;
      });
      this.context = runtime.newContext();
    }

    async execute(): Promise<string> {
      const { context } = this;
      const jsonParse = (this.parse = this.keep(
        context.getProp(this.keep(context.getProp(context.global, 'JSON')), 'parse'),
      ));
      const serialize = this.keep(
        this.slice(() => this.unwrap(context.evalCode(SERIALIZER, 'toolgate:serialize'))),
      );
      for (const name of this.run.host) {
        const handle = context.newFunction(name, (...args) => this.hostCall(name, args));
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
          throw new Failure(
            Code.ToolFailed,
            `${this.run.fileName} waits on a promise nothing will settle (no host call is in flight)`,
          );
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
        if (isStopped()) throw stopped();
      }
    }

    /** The executor's answer to host call `hid`: settles its promise in the script. */
    settleHost(message: Extract<ToScriptWorker, { t: 'host' }>): void {
      const { deferred, name } = this.pending.get(message.hid) ?? {};
      if (this.disposed || !deferred || !this.parse) return;
      this.pending.delete(message.hid);
      try {
        if (!message.ok) {
          const error = this.newError(message.code, message.message);
          deferred.reject(error);
          error.dispose();
          return;
        }
        let handle: QuickJSHandle;
        try {
          handle = this.fromJson(this.parse, message.json);
        } catch (err) {
          const error = this.newError(Code.ToolFailed, `${name}: ${(err as Error).message}`);
          deferred.reject(error);
          error.dispose();
          return;
        }
        deferred.resolve(handle);
        handle.dispose();
      } finally {
        deferred.dispose();
        this.nudge();
      }
    }

    nudge(): void {
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    }

    /** Frees everything of the call; throws when QuickJS cannot free its runtime. */
    dispose(): void {
      if (this.disposed) return;
      this.disposed = true;
      for (const { deferred } of this.pending.values()) deferred.dispose();
      this.pending.clear();
      for (const handle of this.handles) if (handle.alive) handle.dispose();
      this.context.dispose();
      this.runtime.dispose();
    }

    private keep<T extends QuickJSHandle>(handle: T): T {
      this.handles.push(handle);
      return handle;
    }

    /** Runs interpreter work, counting its time against the CPU budget (and on the shared clock). */
    private slice<T>(work: () => T): T {
      if (isStopped()) throw stopped();
      this.sliceStart = now();
      clock[1] = this.sliceStart;
      try {
        return work();
      } finally {
        // The slice ends first, then the sum grows: a watchdog reading in between undercounts
        // for a moment (and looks again), it never counts a slice twice.
        clock[1] = 0;
        this.cpuUsed += now() - this.sliceStart;
        clock[0] = this.cpuUsed;
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
    private failure(handle: QuickJSHandle): Failure {
      if (isStopped()) return stopped();
      const { limits, fileName } = this.run;
      if (this.interrupted) {
        return new Failure(
          Code.Timeout,
          `${fileName} ran out of its ${limits.cpuMs} ms CPU budget`,
          {
            limit: 'cpu',
            cpuMs: limits.cpuMs,
          },
        );
      }
      // Reading a thrown object can run its getters: that is the script's time too.
      let error: ReturnType<typeof describe>;
      try {
        error = this.slice(() => describe(this.context, handle));
      } catch {
        if (this.interrupted || isStopped()) return this.failure(handle);
        return new Failure(Code.ToolFailed, `${fileName} threw something unreadable`);
      }
      if (error.name === 'InternalError' && /out of memory/.test(error.message)) {
        return new Failure(
          Code.ToolFailed,
          `${fileName} ran out of memory (limit ${limits.memoryBytes} bytes)`,
          { limit: 'memory', memoryBytes: limits.memoryBytes },
        );
      }
      const where = error.line ? ` (${fileName}:${error.line})` : '';
      return new Failure(
        Code.ToolFailed,
        `${error.name ? `${error.name}: ` : ''}${error.message || 'the script failed without a message'}${where}`.slice(
          0,
          2000,
        ),
        {
          // A host call's error code, or whatever the script set on what it threw: error codes
          // are short words, so 64 characters of it at most.
          ...(error.code !== undefined ? { hostError: error.code.slice(0, 64) } : {}),
          ...(error.stack ? { stack: error.stack.slice(0, 2000) } : {}),
        },
      );
    }

    /** A host call: a promise in the script, settled when the executor answers. */
    private hostCall(name: string, argHandles: QuickJSHandle[]): QuickJSHandle {
      const { context } = this;
      const deferred = context.newPromise();
      const refuse = (code: string, message: string) => {
        const error = this.newError(code, message);
        deferred.reject(error);
        error.dispose();
        const handle = deferred.handle.dup();
        deferred.dispose();
        return handle;
      };
      const max = this.run.limits.maxHostCallsInFlight;
      if (this.pending.size >= max) {
        return refuse(Code.TooLarge, `${name}: more than ${max} host calls in flight`);
      }
      let args: unknown[];
      try {
        args = argHandles.map((h) => this.argument(h));
      } catch (err) {
        return refuse(Code.InvalidArguments, `${name}: ${(err as Error).message}`);
      }
      const hid = this.nextHostId++;
      this.pending.set(hid, { deferred, name });
      port.postMessage({ t: 'host', id: this.run.id, hid, name, args } satisfies FromScriptWorker);
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
          return dumpCopy(this.context, handle);
        default:
          throw new TypeError(`a ${type} cannot be passed to a host function`);
      }
    }

    private newError(code: string, message: string): QuickJSHandle {
      const error = this.context.newError({ name: 'HostCallError', message });
      const codeHandle = this.context.newString(code);
      this.context.setProp(error, 'code', codeHandle);
      codeHandle.dispose();
      return error;
    }

    /** JSON text inside the context, through the context's own (untampered) `JSON.parse`. */
    private fromJson(jsonParse: QuickJSHandle, json: string): QuickJSHandle {
      const text = this.context.newString(json);
      try {
        return this.slice(() =>
          this.unwrap(this.context.callFunction(jsonParse, this.context.undefined, text)),
        );
      } finally {
        text.dispose();
      }
    }

    private toJson(serialize: QuickJSHandle, value: QuickJSHandle): string {
      const { fileName, limits } = this.run;
      const result = this.slice(() =>
        this.context.callFunction(serialize, this.context.undefined, value),
      );
      if (result.error) {
        if (this.interrupted || isStopped()) {
          const failure = this.failure(result.error);
          result.error.dispose();
          throw failure;
        }
        const error = describe(this.context, result.error);
        result.error.dispose();
        throw new Failure(
          Code.NonSerializableResult,
          `${fileName} returned a value that is not JSON: ${error.message}`,
        );
      }
      const text = this.context.getString(result.value);
      result.value.dispose();
      if (text.length > limits.maxResultBytes || Buffer.byteLength(text) > limits.maxResultBytes) {
        throw new Failure(
          Code.TooLarge,
          `${fileName} returned ${Buffer.byteLength(text)} bytes of JSON, over the ${limits.maxResultBytes}-byte limit`,
        );
      }
      return text;
    }
  }

  let current: ScriptCall | undefined;

  const runCall = async (
    module: import('quickjs-emscripten-core').QuickJSWASMModule,
    run: Extract<ToScriptWorker, { t: 'run' }>,
    post: (answer: FromScriptWorker) => void,
  ) => {
    clock[0] = 0;
    clock[1] = 0;
    let answer: FromScriptWorker;
    let call: ScriptCall | undefined;
    try {
      if (isStopped()) throw stopped();
      call = current = new ScriptCall(module.newRuntime(), run);
      answer = { t: 'done', id: run.id, ok: true, json: await call.execute() };
    } catch (err) {
      answer =
        err instanceof Failure
          ? {
              t: 'done',
              id: run.id,
              ok: false,
              code: err.code,
              message: err.message,
              ...(err.details ? { details: err.details } : {}),
            }
          : {
              // The interpreter itself failed (the thread's own stack ran out under a deep
              // recursion): the call fails, and this worker is not used again.
              t: 'done',
              id: run.id,
              ok: false,
              code: Code.ToolFailed,
              message: `${run.fileName}: the interpreter failed: ${(err as Error).message}`,
              retire: true,
            };
    }
    current = undefined;
    // WebAssembly memory never shrinks: a worker whose call filled its heap is replaced rather
    // than kept warm at that size.
    if (!answer.ok && answer.details?.['limit'] === 'memory') answer = { ...answer, retire: true };
    try {
      call?.dispose();
    } catch {
      // A runtime that cannot be freed (QuickJS found objects still alive) leaves the wasm module
      // in a state nobody should run in again.
      answer = { ...answer, retire: true };
    }
    clock[1] = 0;
    post(answer);
  };

  const post = (answer: FromScriptWorker) => port.postMessage(answer);
  void core.newQuickJSWASMModuleFromVariant(variant).then(async (module) => {
    // One throwaway call first, so the first real one does not pay for the warm-up.
    await runCall(
      module,
      {
        t: 'run',
        id: 0,
        source: 'return { a: [params.n] };',
        fileName: 'warm-up.js',
        params: '{"n":1}',
        host: [],
        limits: {
          memoryBytes: 1 << 24,
          cpuMs: 1000,
          stackBytes: 1 << 17,
          maxResultBytes: 1024,
          maxHostCallsInFlight: 1,
        },
      },
      () => undefined,
    );
    port.on('message', (message: ToScriptWorker) => {
      switch (message.t) {
        case 'run':
          void runCall(module, message, post);
          break;
        case 'host':
          if (current && message.id === current.run.id) current.settleHost(message);
          break;
        case 'stop':
          current?.nudge();
          break;
      }
    });
    port.postMessage({ t: 'ready' } satisfies FromScriptWorker);
  });
}
