// Shared jest settings for every project: swc compiles TypeScript (type checking is the
// `typecheck` target's job), workspace packages resolve to their sources, and the ESM-only
// packages in node_modules are compiled to CommonJS on the way in.
const path = require('node:path');

const root = __dirname;
const esmOnly = ['@marcbachmann/cel-js'];

module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': [
      '@swc/jest',
      {
        jsc: {
          target: 'es2022',
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
        },
        module: { type: 'commonjs' },
      },
    ],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  moduleNameMapper: {
    '^@toolgate/contracts$': path.join(root, 'contracts/src/index.ts'),
    '^@toolgate/(gateway|permission-evaluator|tool-executor|journal|worktree|all-in-one)$': path.join(
      root,
      'services/$1/src/index.ts',
    ),
    '^@toolgate/([a-z-]+)$': path.join(root, 'libs/$1/src/index.ts'),
  },
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testTimeout: 30000,
};
