import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { ScriptEngine, type HostFunction, type ScriptRun } from './script-engine';

let engine: ScriptEngine;
beforeAll(async () => {
  engine = await ScriptEngine.load();
});

function run(source: string, extra: Partial<ScriptRun> = {}): Promise<unknown> {
  return engine.run({ source, fileName: 'probe.js', params: {}, host: {}, ...extra });
}

async function failure(
  promise: Promise<unknown>,
): Promise<{ code: string; message: string; details?: Record<string, unknown> }> {
  try {
    const value = await promise;
    throw new Error(`expected a failure, got ${JSON.stringify(value)}`);
  } catch (err) {
    if (!(err instanceof ToolgateError)) throw err;
    return {
      code: err.code,
      message: err.message,
      ...(err.details ? { details: err.details } : {}),
    };
  }
}

describe('ScriptEngine', () => {
  it('returns the script’s value as JSON, with params bound', async () => {
    await expect(
      run('return { upper: params.text.toUpperCase(), n: params.n + 1 };', {
        params: { text: 'abc', n: 1 },
      }),
    ).resolves.toEqual({ upper: 'ABC', n: 2 });
    await expect(run('const x = 1;')).resolves.toBeNull();
  });

  it('gives the script nothing of Node: no require, process, fetch, timers, module or Buffer', async () => {
    await expect(
      run(
        'return ["require","process","fetch","setTimeout","setInterval","module","exports","Buffer","global","console","read_file","shell","http_get","write_file","std","os"].map((n) => typeof globalThis[n]);',
      ),
    ).resolves.toEqual(Array(16).fill('undefined'));
  });

  it('defines exactly the host functions it is given', async () => {
    const readFile: HostFunction = async ([path]) => `contents of ${String(path)}`;
    await expect(
      run('return [typeof read_file, typeof shell, await read_file("a.txt")];', {
        host: { read_file: readFile },
      }),
    ).resolves.toEqual(['function', 'undefined', 'contents of a.txt']);
  });

  it('stops a runaway loop at its CPU budget', async () => {
    const error = await failure(run('for (;;) {}', { limits: { cpuMs: 50 } }));
    expect(error.code).toBe(ErrorCode.Timeout);
    expect(error.details).toMatchObject({ limit: 'cpu' });
  });

  it('stops a loop the script tries to catch its way out of', async () => {
    const error = await failure(
      run('for (;;) { try { for (;;) {} } catch (e) {} }', { limits: { cpuMs: 50 } }),
    );
    expect(error.code).toBe(ErrorCode.Timeout);
  });

  it('enforces the memory limit, and the next call runs as usual', async () => {
    const error = await failure(
      run('const a = []; for (let i = 0; ; i++) a.push({ i, s: "y" + i });', {
        limits: { memoryBytes: 8 * 1024 * 1024, cpuMs: 60_000 },
      }),
    );
    expect(error.code).toBe(ErrorCode.ToolFailed);
    expect(error.details).toMatchObject({ limit: 'memory' });
    await expect(run('return 6 * 7;')).resolves.toBe(42);
  });

  it('turns unbounded recursion into an error the script sees', async () => {
    await expect(
      run('function f() { return f() + 1; } try { f(); } catch (e) { return e.name; }'),
    ).resolves.toMatch(/RangeError|InternalError/);
  });

  it('survives an interpreter that fails under it: the call fails, the next one runs', async () => {
    const error = await failure(
      run('function f() { return f() + 1; } return f();', {
        limits: { stackBytes: 64 * 1024 * 1024 },
      }),
    );
    expect(error.code).toBe(ErrorCode.ToolFailed);
    await expect(run('return "still here";')).resolves.toBe('still here');
  });

  it('leaks nothing from one call into the next', async () => {
    await run(
      'globalThis.leak = 1; Array.prototype.leak = 2; Object.prototype.polluted = 3; JSON.parse = () => 4;',
    );
    await expect(
      run(
        'return [typeof globalThis.leak, typeof [].leak, typeof ({}).polluted, JSON.parse("5")];',
      ),
    ).resolves.toEqual(['undefined', 'undefined', 'undefined', 5]);
  });

  it('refuses a result JSON cannot carry', async () => {
    for (const value of [
      '() => 1',
      'new Map()',
      'NaN',
      '10n',
      'Symbol("s")',
      '[Infinity]',
      '(() => { const o = {}; o.o = o; return o; })()',
    ]) {
      const error = await failure(run(`return ${value};`));
      expect(error.code).toBe(ErrorCode.NonSerializableResult);
    }
    await expect(
      run('return { a: undefined, b: [1, "x", null, true], d: new Date(0) };'),
    ).resolves.toEqual({
      b: [1, 'x', null, true],
      d: '1970-01-01T00:00:00.000Z',
    });
  });

  it('reports what the script threw, with its line', async () => {
    const error = await failure(run('const a = 1;\nthrow new TypeError("bad input");'));
    expect(error).toMatchObject({
      code: ErrorCode.ToolFailed,
      message: 'TypeError: bad input (probe.js:2)',
    });
  });

  it('passes a host function’s error code to the script', async () => {
    const denied: HostFunction = async () => {
      throw new ToolgateError(ErrorCode.Denied, 'not allowed');
    };
    await expect(
      run('try { await shell("rm -rf /"); } catch (e) { return [e.name, e.code, e.message]; }', {
        host: { shell: denied },
      }),
    ).resolves.toEqual(['HostCallError', 'denied', 'shell: not allowed']);
    const error = await failure(run('await shell("x");', { host: { shell: denied } }));
    expect(error).toMatchObject({ code: ErrorCode.ToolFailed, details: { hostError: 'denied' } });
    // A code of the script's own making is bounded like its message: no 300 KB settlements.
    const own = await failure(
      run('const e = new Error("x"); e.code = "c".repeat(300000); throw e;'),
    );
    expect((own.details as { hostError: string }).hostError).toBe('c'.repeat(64));
  });

  it('reads a thrown promise (or one passed to a host function) as the value it is', async () => {
    const thrown = await failure(run('throw Promise.resolve(1);'));
    expect(thrown.code).toBe(ErrorCode.ToolFailed);
    expect(thrown.message).not.toMatch(/interpreter failed|Lifetime/);
    const rejected = await failure(run('await Promise.reject(Promise.resolve(1));'));
    expect(rejected.message).not.toMatch(/interpreter failed|Lifetime/);
    const seen: unknown[] = [];
    const echo: HostFunction = async (args) => {
      seen.push(args[0]);
      return 'ok';
    };
    await expect(
      run('return await shell(Promise.resolve(1));', { host: { shell: echo } }),
    ).resolves.toBe('ok');
    expect(seen).toHaveLength(1);
  });

  it('fails a script that waits on a promise nothing settles', async () => {
    const error = await failure(run('await new Promise(() => {});'));
    expect(error.message).toMatch(/nothing will settle/);
  });

  it('ends a call whose signal fires while it waits on the host, with the signal’s reason', async () => {
    const controller = new AbortController();
    const slow: HostFunction = (_args, signal) =>
      new Promise((resolve) => signal.addEventListener('abort', () => resolve('late')));
    const pending = run('return await http_get("x");', {
      host: { http_get: slow },
      signal: controller.signal,
    });
    setImmediate(() => controller.abort(new ToolgateError(ErrorCode.Timeout, 'deadline')));
    await expect(failure(pending)).resolves.toMatchObject({
      code: ErrorCode.Timeout,
      message: 'deadline',
    });
  });

  it('caps host calls in flight', async () => {
    const never: HostFunction = () => new Promise(() => undefined);
    const error = await run(
      'const calls = []; for (let i = 0; i < 3; i++) calls.push(shell("x").catch((e) => e.code)); return await calls[2];',
      { host: { shell: never }, limits: { maxHostCallsInFlight: 2 } },
    );
    expect(error).toBe(ErrorCode.TooLarge);
  });

  it('runs scripts off this thread: a memory bomb and a spinning script stall neither this thread, a second script nor its host calls, and settle at their deadline', async () => {
    // Each attacker tells the test it runs (a host call), then loops with budgets only the
    // deadline can end: on this thread, the loops would hold the event loop, and nothing below —
    // the timers, the second script, its host call, the deadline itself — could run before them.
    const deadline = new AbortController();
    const running = new Set<string>();
    let bothRunning!: () => void;
    const attackersRun = new Promise<void>((resolve) => (bothRunning = resolve));
    const started =
      (name: string): HostFunction =>
      async () => {
        running.add(name);
        if (running.size === 2) bothRunning();
        return null;
      };
    const settledFirst: string[] = [];
    const attack = (name: string, loop: string) =>
      failure(
        run(`await started();\n${loop}`, {
          host: { started: started(name) },
          limits: { cpuMs: 600_000, memoryBytes: 256 * 1024 * 1024 },
          signal: deadline.signal,
        }),
      ).finally(() => settledFirst.push(name));
    const bomb = attack('bomb', "const a = [];\nfor (;;) a.push('x'.repeat(1 << 20));");
    const spin = attack('spin', 'for (;;) {}');
    await attackersRun;

    const echo: HostFunction = async ([text]) => `echo ${String(text)}`;
    const neighbour = run('return [await echo(params.n), 6 * params.n];', {
      params: { n: 7 },
      host: { echo },
    }).finally(() => settledFirst.push('second script'));
    const timers = (async () => {
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    })().finally(() => settledFirst.push('timers'));
    await expect(neighbour).resolves.toEqual(['echo 7', 42]);
    await timers;
    // Both attackers still run: the neighbours finished first.
    expect(settledFirst).toEqual(expect.arrayContaining(['second script', 'timers']));
    expect(settledFirst).toHaveLength(2);

    deadline.abort(new ToolgateError(ErrorCode.Timeout, 'the deadline passed'));
    for (const attacker of [await bomb, await spin]) {
      expect(attacker).toMatchObject({ code: ErrorCode.Timeout, message: 'the deadline passed' });
    }
    // The stopped (or killed and replaced) workers leave the engine serving.
    await expect(run('return 6 * 7;')).resolves.toBe(42);
  });

  it('holds the CPU budget while the heap grows: a memory bomb is stopped at its budget, not at its heap limit', async () => {
    const error = await failure(
      run("const a = [];\nfor (;;) a.push('x'.repeat(1 << 20));", {
        limits: { cpuMs: 300, memoryBytes: 256 * 1024 * 1024 },
      }),
    );
    expect(error).toMatchObject({ code: ErrorCode.Timeout, details: { limit: 'cpu', cpuMs: 300 } });
    await expect(run('return "still serving";')).resolves.toBe('still serving');
  });

  it('says where a script does not compile, without running it', () => {
    expect(engine.syntaxError('return 1;', 'ok.js')).toBeNull();
    expect(engine.syntaxError('const a = ;', 'bad.js')).toMatch(/bad\.js:1/);
    expect(engine.syntaxError('for (;;) {}', 'loop.js')).toBeNull();
    expect(engine.syntaxError('await read_file("x"); return 1;', 'await.js')).toBeNull();
  });
});
