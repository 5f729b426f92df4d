#!/usr/bin/env node
// `npx toolgate …` in a clone: the CLI from its sources (no build step), in the caller's directory.
require('../../../scripts/from-source.cjs');
require('../src/main.ts');
