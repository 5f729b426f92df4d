#!/usr/bin/env node
import { runCli } from './run-cli';

// The whole CLI lives in runCli so tests run it in-process; this file only wires it to the process.
// Ctrl-C stops a command that runs until stopped (`journal tail`) cleanly; a second one exits.
const stop = new AbortController();
process.once('SIGINT', () => {
  stop.abort();
  process.once('SIGINT', () => process.exit(130));
});
void runCli(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  signal: stop.signal,
}).then((code) => {
  process.exitCode = code;
  // Nothing of the command may keep the process alive once it has answered.
  process.removeAllListeners('SIGINT');
});
