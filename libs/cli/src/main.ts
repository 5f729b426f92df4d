#!/usr/bin/env node
import { runCli } from './run-cli';

// The whole CLI lives in runCli so tests run it in-process; this file only wires it to the process.
void runCli(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
}).then((code) => {
  process.exitCode = code;
});
