#!/usr/bin/env node
// Scaffolds the per-project files every workspace package shares (package.json scripts, tsconfigs,
// jest config). Usage: node scripts/new-project.js <dir> <package-name> <tag>[,<tag>] [dep,...]
const fs = require('node:fs');
const path = require('node:path');

const [dir, name, tags, deps = ''] = process.argv.slice(2);
if (!dir || !name || !tags) {
  console.error('usage: new-project.js <dir> <package-name> <tags> [deps]');
  process.exit(2);
}
const abs = path.resolve(dir);
const up = path.relative(abs, path.resolve(__dirname, '..')) || '.';
fs.mkdirSync(path.join(abs, 'src'), { recursive: true });
const write = (file, text) => {
  const p = path.join(abs, file);
  if (!fs.existsSync(p)) fs.writeFileSync(p, text);
};
const dependencies = Object.fromEntries(
  deps.split(',').filter(Boolean).map((d) => [d, '*']),
);
write(
  'package.json',
  JSON.stringify(
    {
      name,
      version: '0.1.0',
      private: true,
      main: 'dist/index.js',
      types: 'dist/index.d.ts',
      files: ['dist'],
      scripts: {
        build: 'tsc -p tsconfig.build.json',
        typecheck: 'tsc -p tsconfig.json --noEmit',
        test: 'jest',
        lint: 'eslint src',
      },
      dependencies,
      nx: { tags: tags.split(',') },
    },
    null,
    2,
  ) + '\n',
);
write(
  'tsconfig.json',
  JSON.stringify(
    {
      extends: `${up}/tsconfig.base.json`,
      compilerOptions: { types: ['node', 'jest'], noEmit: true, paths: pathsFor(up) },
      include: ['src/**/*.ts', 'test/**/*.ts'],
    },
    null,
    2,
  ) + '\n',
);
write(
  'tsconfig.build.json',
  JSON.stringify(
    {
      extends: `${up}/tsconfig.base.json`,
      compilerOptions: { outDir: 'dist', rootDir: 'src', noEmit: false },
      include: ['src/**/*.ts'],
      exclude: ['src/**/*.spec.ts'],
    },
    null,
    2,
  ) + '\n',
);
write('jest.config.js', `module.exports = { ...require('${up}/jest.preset.js'), rootDir: __dirname };\n`);

function pathsFor(rel) {
  return {
    '@toolgate/contracts': [`${rel}/contracts/src/index.ts`],
    ...Object.fromEntries(
      ['gateway', 'permission-evaluator', 'tool-executor', 'journal', 'worktree', 'all-in-one'].map((s) => [
        `@toolgate/${s}`,
        [`${rel}/services/${s}/src/index.ts`],
      ]),
    ),
    '@toolgate/*': [`${rel}/libs/*/src/index.ts`],
  };
}
