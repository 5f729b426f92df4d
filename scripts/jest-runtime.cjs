// jest's runtime with a V8 code cache for the modules it compiles. jest evaluates every module again
// in each test file's fresh registry (that isolation is kept: each module still runs anew in the
// file's own context), compiling it with vm.compileFunction, which V8's own compilation cache never
// serves: a file that starts a stack evaluates ~2,000 modules (~13 MB of JavaScript: NestJS,
// OpenTelemetry, NATS, zod and the workspace), and each worker parsed and compiled them again for
// every file — ~0.8 of the ~2 CPU-seconds such a file cost before its first test.
//
// How a module is compiled and its cache kept: scripts/v8-code-cache.cjs.
const vm = require('node:vm');
const { default: Runtime } = require('jest-runtime');
const { compileCached } = require('./v8-code-cache.cjs');

const compileFunction = vm.compileFunction;

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
