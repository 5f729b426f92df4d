// jest's runtime with a V8 code cache for the modules it compiles. jest evaluates every module again
// in each test file's fresh registry (that isolation is kept: each module still runs anew in the
// file's own context), compiling it with vm.compileFunction, which V8's own compilation cache never
// serves: a file that starts a stack evaluates ~2,000 modules (~13 MB of JavaScript: NestJS,
// OpenTelemetry, NATS, zod and the workspace), and each worker parsed and compiled them again for
// every file — ~0.8 of the ~2 CPU-seconds such a file cost before its first test.
//
// Here a module is compiled as a script that evaluates to the same function jest would have
// compiled (the same parameters, the body unchanged), which V8 can serialize after it ran: the
// second time a worker compiles a file, it takes the code cache of the first compile — by then
// holding every function the earlier test file called, not only the top level — and every later
// compile of the same source deserializes that cache instead of parsing and compiling. A cache
// is only ever used for the exact source and parameters it was made from.
const vm = require('node:vm');
const { default: Runtime } = require('jest-runtime');

const compileFunction = vm.compileFunction;
/**
 * filename → the source and parameters compiled, and either the first compile's script (whose
 * cache is taken at the second compile) or that cache.
 */
const codeCache = new Map();

/** `vm.compileFunction(code, params, options)` as jest calls it, through a cached script. */
function compileCached(code, params, options) {
  const signature = params.join(', ');
  let entry = codeCache.get(options.filename);
  if (entry && (entry.code !== code || entry.signature !== signature)) entry = undefined;
  // The wrapper opens on the body's first line, and the column offset takes its length back: stack
  // traces name the lines and columns compileFunction's would.
  const head = `(function (${signature}) {`;
  const wrapped = `${head}${code}\n})`;
  const scriptOptions = {
    filename: options.filename,
    columnOffset: -head.length,
    importModuleDynamically: options.importModuleDynamically,
  };
  if (entry?.script) {
    entry.data = entry.script.createCachedData();
    entry.script = undefined;
  }
  if (entry?.data) {
    const script = new vm.Script(wrapped, { ...scriptOptions, cachedData: entry.data });
    if (!script.cachedDataRejected) return script.runInContext(options.parsingContext);
  }
  const script = new vm.Script(wrapped, scriptOptions);
  codeCache.set(options.filename, { code, signature, script, data: undefined });
  return script.runInContext(options.parsingContext);
}

class CodeCachingRuntime extends Runtime {
  constructor(...args) {
    super(...args);
    // The module executor compiles through `vm.compileFunction`, read off node:vm at each call: it
    // sees the caching variant for the length of its own compile, and nothing else ever does.
    const executor = this.executor;
    const compile = executor.compile.bind(executor);
    executor.compile = (scriptSource, filename) => {
      vm.compileFunction = compileCached;
      try {
        return compile(scriptSource, filename);
      } finally {
        vm.compileFunction = compileFunction;
      }
    };
  }
}

module.exports = CodeCachingRuntime;
