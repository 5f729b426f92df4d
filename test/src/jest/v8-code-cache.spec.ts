import path from 'node:path';
import vm from 'node:vm';

// The compile jest's runtime uses in every worker (scripts/jest-runtime.cjs): what a module gets
// from it must be what vm.compileFunction would give it, however often it is compiled.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { compileCached } = require(path.join(__dirname, '../../../scripts/v8-code-cache.cjs')) as {
  compileCached: typeof vm.compileFunction;
};

const PARAMS = ['module', 'exports', 'require'];
let files = 0;
/** A file name of this test's own: the cache is the process's, keyed by file name. */
const fileName = () => `/virtual/v8-code-cache-${process.pid}-${++files}.js`;

/** Compiles `code` as jest would for `filename` in a fresh context and runs it as a module. */
function load(code: string, filename: string, params = PARAMS): Record<string, unknown> {
  const parsingContext = vm.createContext({});
  const fn = compileCached(code, params, { filename, parsingContext });
  const module = { exports: {} as Record<string, unknown> };
  fn.call(module.exports, module, module.exports, () => undefined);
  return module.exports;
}

const counter = [
  'let calls = 0;',
  'function helper(n) { return n * 2; }',
  'exports.next = () => { calls += 1; return helper(calls); };',
].join('\n');

describe('the code cache of jest workers', () => {
  it('gives each load its own module state, however often the source is compiled from the cache', () => {
    const file = fileName();
    for (let load_ = 0; load_ < 4; load_++) {
      const exports = load(counter, file);
      const next = exports.next as () => number;
      // Called in the first load, so its code is in the cache the later loads are compiled from.
      expect([next(), next()]).toEqual([2, 4]);
    }
  });

  it('never runs a cached compile for another source or other parameters of the same file', () => {
    const file = fileName();
    const a = 'exports.value = 1 + 1;';
    const b = 'exports.value = 2 * 3;'; // as long as `a`: V8's own check would not tell them apart
    expect(b.length).toBe(a.length);
    expect(load(a, file).value).toBe(2);
    expect(load(a, file).value).toBe(2);
    expect(load(b, file).value).toBe(6);
    expect(load(a, file).value).toBe(2);
    const withOther = load('exports.value = typeof extra;', file, [...PARAMS, 'extra']);
    expect(withOther.value).toBe('undefined');
  });

  it("names the lines and columns vm.compileFunction's stack traces name", () => {
    /** `<file>:<line>:<column>` of the innermost frame of what `run` throws. */
    const frameOf = (run: () => void) => {
      try {
        run();
      } catch (err) {
        return /\/virtual\/[^:]+:\d+:\d+/.exec((err as Error).stack ?? '')?.[0];
      }
      throw new Error('did not throw');
    };
    // Line 1 is where the wrapper opens: its columns are the ones a missing offset would shift.
    for (const code of [
      "exports.a = 1; throw new Error('line 1');",
      "exports.a = 1;\n  throw 0 || new Error('line 2');",
    ]) {
      const file = fileName();
      const parsingContext = vm.createContext({});
      const plain = frameOf(() =>
        vm.compileFunction(code, PARAMS, { filename: file, parsingContext })(
          {},
          {},
          () => undefined,
        ),
      );
      expect(plain).toMatch(/:\d+:\d+$/);
      for (let i = 0; i < 3; i++) expect(frameOf(() => load(code, file))).toBe(plain);
    }
  });
});
