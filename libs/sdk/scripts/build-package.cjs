#!/usr/bin/env node
// Builds @toolgate/sdk as a package another team installs with `npm i`: nothing of the monorepo
// may be needed at install or run time.
//
// - JavaScript: one CommonJS bundle (esbuild) of the SDK with the internal @toolgate/* code it
//   reaches built into it; every third-party package stays an import, declared in package.json.
//   Internal modules are treated as free of side effects, so a module the SDK does not reach
//   (the telemetry SDK's exporter set-up, the services' consumers) is left out with its imports.
// - Types: tsc emits declarations for the SDK and the internal sources it reaches; their
//   `@toolgate/*` specifiers are rewritten to relative paths inside the package.
// - Then every bare import left in the bundle must be a declared dependency or a Node built-in,
//   every declared one must be imported, and each declared range must be the root package.json's:
//   the build fails otherwise, so an undeclared or drifted dependency never ships.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { builtinModules } = require('node:module');
const { execFileSync } = require('node:child_process');
const esbuild = require('esbuild');

const sdkDir = path.resolve(__dirname, '..');
const root = path.resolve(sdkDir, '../..');
const dist = path.join(sdkDir, 'dist');
const pkg = JSON.parse(fs.readFileSync(path.join(sdkDir, 'package.json'), 'utf8'));

/** Where an internal package's sources are, as jest's moduleNameMapper and tsconfig paths say. */
function internalEntry(name) {
  const services = ['gateway', 'permission-evaluator', 'tool-executor', 'journal', 'worktree'];
  if (name === 'contracts') return path.join(root, 'contracts/src/index.ts');
  if (services.includes(name)) throw new Error(`the SDK may not import the ${name} service`);
  return path.join(root, 'libs', name, 'src/index.ts');
}

const declared = new Set([
  ...Object.keys(pkg.dependencies ?? {}),
  ...Object.keys(pkg.peerDependencies ?? {}),
]);
const packageName = (spec) =>
  spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
const isBuiltin = (spec) => spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]);

/** Internal packages (and every file under them) are bundled and side-effect free. */
const internalPlugin = {
  name: 'toolgate-internal',
  setup(build) {
    build.onResolve({ filter: /^@toolgate\// }, (args) => ({
      path: internalEntry(args.path.slice('@toolgate/'.length)),
      sideEffects: false,
    }));
    build.onResolve({ filter: /^\./ }, async (args) => {
      if (args.pluginData === 'resolving') return undefined;
      const result = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: 'resolving',
      });
      if (result.errors.length > 0) return { errors: result.errors };
      const ownSdk = result.path.startsWith(path.join(sdkDir, 'src'));
      return { ...result, sideEffects: ownSdk ? undefined : false };
    });
    // Any other bare import is a third-party package: left to the installer.
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@toolgate/') ? undefined : { path: args.path, external: true },
    );
  },
};

async function main() {
  fs.rmSync(dist, { recursive: true, force: true });
  const result = await esbuild.build({
    entryPoints: [path.join(sdkDir, 'src/index.ts')],
    outfile: path.join(dist, 'index.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: false,
    metafile: true,
    logLevel: 'warning',
    plugins: [internalPlugin],
  });

  const imported = new Set();
  for (const output of Object.values(result.metafile.outputs))
    for (const imp of output.imports) if (imp.external) imported.add(imp.path);
  const undeclared = [...imported].filter(
    (spec) => !isBuiltin(spec) && !declared.has(packageName(spec)),
  );
  if (undeclared.length > 0) {
    throw new Error(
      `the bundle imports packages libs/sdk/package.json does not declare: ${undeclared.join(', ')}`,
    );
  }
  // The bundle was built and tested against the repository's versions: a range copied by hand
  // into libs/sdk/package.json must still be the root's, or an installer could get another.
  const rootPkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const rootRanges = { ...rootPkg.devDependencies, ...rootPkg.dependencies };
  const drifted = [...declared]
    .map((name) => [name, pkg.dependencies?.[name] ?? pkg.peerDependencies?.[name]])
    .filter(([name, range]) => rootRanges[name] !== range)
    .map(([name, range]) => `${name} ${range} (root: ${rootRanges[name] ?? 'absent'})`);
  if (drifted.length > 0) {
    throw new Error(
      `libs/sdk/package.json declares other ranges than the root package.json the bundle was ` +
        `built against: ${drifted.join(', ')}`,
    );
  }
  const unused = [...declared].filter(
    (name) => ![...imported].some((spec) => packageName(spec) === name),
  );
  if (unused.length > 0) {
    throw new Error(`libs/sdk/package.json declares packages the bundle never imports: ${unused}`);
  }

  // Declarations: the SDK and the internal sources it reaches, then relative specifiers.
  const typesDir = path.join(dist, 'types');
  execFileSync(
    process.execPath,
    [require.resolve('typescript/bin/tsc'), '-p', path.join(sdkDir, 'tsconfig.package.json')],
    { stdio: 'inherit', cwd: sdkDir },
  );
  rewriteSpecifiers(typesDir, typesDir);
  const entry = path.join(typesDir, 'libs/sdk/src/index.d.ts');
  if (!fs.existsSync(entry)) throw new Error(`no declarations at ${entry}`);
  console.log(
    `@toolgate/sdk: dist/index.js (${Math.round(fs.statSync(path.join(dist, 'index.js')).size / 1024)} KiB), ` +
      `imports ${[...imported]
        .filter((s) => !isBuiltin(s))
        .sort()
        .join(', ')}`,
  );
}

/** `from '@toolgate/x'` and `import('@toolgate/x')` in .d.ts files → relative paths. */
function rewriteSpecifiers(dir, typesDir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      rewriteSpecifiers(file, typesDir);
      continue;
    }
    if (!entry.name.endsWith('.d.ts')) continue;
    const text = fs.readFileSync(file, 'utf8');
    const rewritten = text.replace(/(['"])@toolgate\/([a-z-]+)\1/g, (_m, quote, name) => {
      const target = path
        .relative(path.dirname(file), path.join(typesDir, path.relative(root, internalEntry(name))))
        .replace(/\.ts$/, '');
      return `${quote}${target.startsWith('.') ? target : `./${target}`}${quote}`;
    });
    if (rewritten !== text) fs.writeFileSync(file, rewritten);
  }
}

main().catch((err) => {
  console.error(err.message ?? err);
  process.exit(1);
});
