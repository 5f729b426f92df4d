// Every project's own jest.config.js (contracts, test, libs/*, services/*), for the root configs
// that run them all in one jest process sharing one worker pool: jest.config.js (`npm test`) and
// jest.unit.config.js (`npm run test:unit`).
const fs = require('node:fs');
const path = require('node:path');

const root = __dirname;
const projectDirs = ['contracts', 'test', 'libs', 'services'].flatMap((dir) =>
  fs.existsSync(path.join(root, dir, 'jest.config.js'))
    ? [dir]
    : fs
        .readdirSync(path.join(root, dir))
        .map((name) => path.join(dir, name))
        .filter((d) => fs.existsSync(path.join(root, d, 'jest.config.js'))),
);

/** Each project's config, named after its directory, ignoring the paths matching `ignore`. */
function projects(ignore = []) {
  return projectDirs.map((dir) => ({
    ...require(path.join(root, dir, 'jest.config.js')),
    displayName: dir,
    testPathIgnorePatterns: ['/node_modules/', ...ignore],
  }));
}

// Global options: jest reads them from the root config only, never from a project's (a project's
// `testTimeout` from jest.preset.js is ignored in a multi-project run, so it is set here). Twice the
// preset's: in a shared pool a file's stack starts while other workers hold the cores, and a
// timeout only bounds a hang — it makes no test pass that would fail.
const testTimeout = 2 * require('./jest.preset.js').testTimeout;

module.exports = { projects, testTimeout };
