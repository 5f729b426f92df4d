// Runs Toolgate's TypeScript sources directly: `node --require ./scripts/from-source.cjs <file>.ts`.
// swc compiles each module as it is loaded (decorator metadata included, as under jest), and
// tsconfig.run.json maps every @toolgate/* package to its sources, so `npm start`, the single
// services and the CLI need no build step. The deploy image still runs tsc's dist/ output.
const path = require('node:path');

process.env.SWC_NODE_PROJECT ??= path.join(__dirname, '..', 'tsconfig.run.json');
require('@swc-node/register');
