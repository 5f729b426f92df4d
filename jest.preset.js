// Shared jest settings for every project: swc compiles TypeScript (type checking is the
// `typecheck` target's job), workspace packages resolve to their sources, and the ESM-only
// packages in node_modules are compiled to CommonJS on the way in.
const path = require('node:path');

const root = __dirname;
// @kubernetes/client-node and its OpenID client are ESM only too (loaded lazily by the container
// executor's Kubernetes backend; plain Node 20.19+ requires them natively).
const esmOnly = [
  '@marcbachmann/cel-js',
  '@kubernetes/client-node',
  'openid-client',
  'oauth4webapi',
  'jose',
];

module.exports = {
  testEnvironment: 'node',
  runtime: path.join(root, 'scripts/jest-runtime.cjs'),
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
    '^@toolgate/(gateway|permission-evaluator|tool-executor|journal|worktree|all-in-one)$':
      path.join(root, 'services/$1/src/index.ts'),
    '^@toolgate/([a-z-]+)$': path.join(root, 'libs/$1/src/index.ts'),
  },
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testTimeout: 30000,
};
