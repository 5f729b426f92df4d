// `npm run test:unit`: every project's specs that need no server (`*.spec.ts`, never
// `*.int.spec.ts`), in one jest run across the projects so they share one worker pool.
// Each project keeps its own jest.config.js; this only narrows what it matches.
const { projects, testTimeout } = require('./jest.projects.js');

module.exports = {
  testTimeout,
  projects: projects(['\\.int\\.spec\\.ts$']),
};
