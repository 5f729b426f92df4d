// jest's runtime with a V8 code cache for the modules it compiles. jest evaluates every module again
// in each test file's fresh registry (that isolation is kept: each module still runs anew in the
// file's own context), compiling it with vm.compileFunction, which V8's own compilation cache never
// serves: an integration spec spent ~0.4 CPU-s of its ~2 parsing the NestJS, OpenTelemetry, NATS,
// zod and workspace sources that the worker had parsed for the file before. Here each worker keeps
// the code cache of what it compiled, keyed by file name, and hands it back to V8 when the exact
// same source is compiled again with the same parameters; anything else compiles afresh.
const vm = require('node:vm');
const { default: Runtime } = require('jest-runtime');

const compileFunction = vm.compileFunction;
/** filename → the source and parameters it was compiled with, and V8's code cache for it. */
const codeCache = new Map();

function compileCached(code, params, options) {
  const cached = codeCache.get(options.filename);
  const signature = params.join();
  if (cached && cached.code === code && cached.signature === signature) {
    const fn = compileFunction(code, params, { ...options, cachedData: cached.data });
    if (!fn.cachedDataRejected) return fn;
  }
  const fn = compileFunction(code, params, { ...options, produceCachedData: true });
  if (fn.cachedDataProduced) codeCache.set(options.filename, { code, signature, data: fn.cachedData });
  return fn;
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
