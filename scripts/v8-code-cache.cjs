// A V8 code cache for `vm.compileFunction` as jest calls it (see scripts/jest-runtime.cjs): a module
// is compiled as a script that evaluates to the same function (the same parameters, the body
// unchanged), which V8 can serialize after it ran. The second time a file is compiled, the first
// compile's cache is taken — by then holding every function the earlier test file called, not only
// the top level — and every later compile of the same source deserializes it instead of parsing and
// compiling. A cache is only ever used for the exact source and parameters it was made from.
const vm = require('node:vm');

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

module.exports = { compileCached };
