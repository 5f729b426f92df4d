// `npm test`: every project's specs, pure (`*.spec.ts`) and integration (`*.int.spec.ts`), in one
// jest run across the projects sharing one worker pool. An integration spec mostly waits (on NATS,
// PostgreSQL, a child process, a timer), so the pool holds twice as many workers as the machine has
// cores (jest's own default is one fewer than the cores: a single worker on a 2-core machine).
// Test files run side by side safely: each takes its own stream prefix, Postgres schema, temp
// directories and, for a nats-server or cluster of its own, ports the kernel picked.
// `npx nx test <project>` still runs one project with its own jest.config.js.
const os = require('node:os');
const { projects, testTimeout } = require('./jest.projects.js');

const cores = os.availableParallelism();

module.exports = {
  testTimeout,
  maxWorkers: Math.max(2, cores * 2),
  testSequencer: require.resolve('./jest.sequencer.js'),
  projects: projects(),
};
