// `npm run test:unit`: every project's specs that need no server (`*.spec.ts`, never
// `*.int.spec.ts`), in one jest run across the projects so they share one worker pool.
// Each project keeps its own jest.config.js; this only narrows what it matches. The specs are
// CPU-bound: one worker per core (jest's default leaves one core to its own, mostly idle, process).
const os = require('node:os');
const { projects, testTimeout } = require('./jest.projects.js');

module.exports = {
  testTimeout,
  maxWorkers: os.availableParallelism(),
  projects: projects(['\\.int\\.spec\\.ts$']),
};
