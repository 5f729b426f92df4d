// The conformance CLI imports `globSync` from `fs` (Node 22+) for a results summary the server
// runs here never reach; on Node 20 the import alone would stop it from starting. This module
// stands in for `fs` for the CLI's files only (see hooks.mjs): all of `fs`, plus a `globSync`
// that says why it is missing if it is ever called.
export * from 'node:fs';
import fs from 'node:fs';
export default fs;
export function globSync() {
  throw new Error('fs.globSync needs Node 22; this conformance run does not use it');
}
