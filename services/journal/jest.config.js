const preset = require('../../jest.preset.js');

// PGlite's CommonJS build (`.cjs`) loads its wasm and node built-ins with dynamic `import()`,
// which jest's CommonJS runtime refuses without --experimental-vm-modules. Compiling it with the
// preset's swc transform turns those into `require` calls. (Node itself runs it unchanged.)
const transformed = ['@marcbachmann/cel-js', '@electric-sql/pglite'];
const [, swc] = Object.entries(preset.transform)[0];

module.exports = {
  ...preset,
  rootDir: __dirname,
  transform: { ...preset.transform, '^.+\\.cjs$': swc },
  transformIgnorePatterns: [`/node_modules/(?!(${transformed.join('|')})/)`],
};
