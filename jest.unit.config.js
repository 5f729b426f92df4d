// `npm run test:unit`: every project's specs that need no server (`*.spec.ts`, never
// `*.int.spec.ts`), in one jest run across the projects so they share one worker pool.
// Each project keeps its own jest.config.js; this only narrows what it matches.
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

module.exports = {
  projects: projectDirs.map((dir) => ({
    ...require(path.join(root, dir, 'jest.config.js')),
    displayName: dir,
    testPathIgnorePatterns: ['/node_modules/', '\\.int\\.spec\\.ts$'],
  })),
};
