// Runs Toolgate's TypeScript sources directly: `node --require ./scripts/from-source.cjs <file>.ts`.
// Every .ts module outside node_modules is compiled by swc as it is loaded (decorator metadata
// included, as under jest), and tsconfig.run.json's paths map every @toolgate/* package to its
// sources, so `npm start`, the single services and the CLI need no build step. The deploy image
// still runs tsc's dist/ output.
//
// It is a require hook on @swc/core's transformSync and nothing else: @swc-node/register, which
// did this before, loads the whole `typescript` package (~0.75 CPU-seconds of every process start)
// only to read tsconfig.run.json. The options below are the ones it derived from that file (its
// output and this hook's were byte for byte the same, inline source map included, for every .ts
// file in the repository); what swc makes of them is cached on disk, keyed by a hash of the
// source, its path, the options and swc's version, so a start compiles only what changed.
const crypto = require('node:crypto');
const fs = require('node:fs');
const Module = require('node:module');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const nodeModules = `${path.sep}node_modules${path.sep}`;

/** tsconfig.run.json's `paths`, absolute, as swc's resolver wants them. */
function runPaths() {
  const config = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.run.json'), 'utf8'));
  const baseUrl = path.resolve(root, config.compilerOptions.baseUrl);
  const paths = {};
  for (const [alias, targets] of Object.entries(config.compilerOptions.paths)) {
    paths[alias] = targets.map((target) => path.resolve(baseUrl, target));
  }
  return { baseUrl, paths };
}

const { baseUrl, paths } = runPaths();

/**
 * swc's options for a file: tsconfig.base.json's (target ES2022, so class fields are defined;
 * experimentalDecorators with emitDecoratorMetadata, which Nest's injection reads; esModuleInterop)
 * in CommonJS, with source maps for stack traces and debuggers.
 */
function swcOptions(filename) {
  return {
    filename,
    jsc: {
      target: 'es2022',
      externalHelpers: false,
      parser: { syntax: 'typescript', tsx: false, decorators: true, dynamicImport: true },
      transform: {
        legacyDecorator: true,
        decoratorVersion: '2021-12',
        decoratorMetadata: true,
        useDefineForClassFields: true,
      },
      keepClassNames: true,
      paths,
      baseUrl,
      experimental: { keepImportAttributes: true },
    },
    minify: false,
    isModule: true,
    module: { type: 'commonjs', noInterop: false, ignoreDynamic: false },
    sourceMaps: true,
    inlineSourcesContent: true,
    swcrc: false,
  };
}

let swc;
let salt;
/** What the output depends on besides the source and its path. */
function cacheSalt() {
  salt ??= [
    'toolgate-from-source 1',
    require('@swc/core/package.json').version,
    JSON.stringify(swcOptions('')),
  ].join('\0');
  return salt;
}

/** Where swc's output is kept (TOOLGATE_FROM_SOURCE_CACHE moves it; nothing else reads it). */
const cacheDir =
  process.env.TOOLGATE_FROM_SOURCE_CACHE ??
  path.join(os.tmpdir(), `toolgate-from-source-${process.getuid?.() ?? 'user'}`);
// What runs is loaded from there: the executor refuses a tool scope that holds it, as it refuses
// one that holds the sources (libs/service-kit, `installationPaths`).
globalThis[Symbol.for('toolgate.from-source-cache')] = cacheDir;
let cacheUsable;

/**
 * Whether the cache may be read and written: a directory of this user's that nobody else can
 * write (made so when missing). A predictable name in a shared temp directory could have been
 * made first by another user, with entries of theirs: then nothing is read from it, and every
 * module is compiled.
 */
function cacheIsOurs() {
  if (cacheUsable !== undefined) return cacheUsable;
  try {
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    const stat = fs.lstatSync(cacheDir);
    const uid = process.getuid?.();
    cacheUsable =
      stat.isDirectory() && (uid === undefined || stat.uid === uid) && (stat.mode & 0o022) === 0;
  } catch {
    cacheUsable = false;
  }
  return cacheUsable;
}

/** Each compiled module's text, whose inline map source-map-support reads when it formats a stack. */
const compiled = new Map();
const MAP_COMMENT = '\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

/** swc's output for a module with its source map inline, from the cache or compiled now. */
function compile(source, filename) {
  const key = crypto
    .createHash('sha256')
    .update(cacheSalt())
    .update('\0')
    .update(filename)
    .update('\0')
    .update(source)
    .digest('hex');
  const file = path.join(cacheDir, `${key}.js`);
  const cached = cacheIsOurs();
  try {
    if (cached) return fs.readFileSync(file, 'utf8');
  } catch {
    // Not compiled yet.
  }
  swc ??= require('@swc/core');
  const { code, map } = swc.transformSync(source, swcOptions(filename));
  const text = `${code}${MAP_COMMENT}${Buffer.from(map, 'utf8').toString('base64')}`;
  if (!cached) return text;
  try {
    // A unique name, then a rename: a reader sees a whole entry or none.
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, file);
  } catch {
    // A cache that cannot be written costs the next start a compile, nothing else.
  }
  return text;
}

/** The source map of a module this hook compiled, or null. */
function sourceMapOf(filename) {
  const text = compiled.get(filename);
  if (text === undefined) return null;
  const at = text.lastIndexOf(MAP_COMMENT);
  return Buffer.from(text.slice(at + MAP_COMMENT.length), 'base64').toString('utf8');
}

const loadJs = Module._extensions['.js'];
Module._extensions['.ts'] = function loadTs(module, filename) {
  if (filename.includes(nodeModules)) return loadJs(module, filename);
  const text = compile(fs.readFileSync(filename, 'utf8'), filename);
  compiled.set(filename, text);
  module._compile(text, filename);
};

if (!process.sourceMapsEnabled) {
  require('source-map-support').install({
    handleUncaughtExceptions: false,
    environment: 'node',
    retrieveSourceMap(file) {
      const map = sourceMapOf(file);
      return map === null ? null : { url: file, map };
    },
  });
}
