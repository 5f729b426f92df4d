// `node --import ./register.mjs scenario-runner.mjs <cli>`, forked with an IPC channel: the
// conformance CLI's `server` command run once per message, in one process that stays up, so a
// run of ten scenarios loads Node.js, the CLI and its dependencies (express, the MCP SDK, zod,
// undici, ...) once instead of ten times.
//
// Each message `{ id, args }` is one invocation `conformance <args...>`: the CLI's module is
// evaluated afresh (a new URL, `?run=<id>`), so its own state — the wire-schema recorder, the
// scenario registry — is that run's alone, as in a process of its own; the answer
// `{ id, code, output }` is what that process would have exited with and printed. `process.exit`
// ends the run, not this process: the run's code stops there (a sentinel thrown at the call,
// whatever it reaches afterwards — the CLI's catch-all, its unhandled rejection — is the exit of
// a process already gone, so it is neither printed nor answered), and the next run starts clean.
import { pathToFileURL } from 'node:url';

const cli = pathToFileURL(process.argv[2]).href;

/** The run in progress, `undefined` between runs (and once its `process.exit` is called). */
let run;

class Exited {
  constructor(code) {
    this.code = code;
  }
}

function finish(code) {
  const { id, output } = run;
  run = undefined;
  process.send({ id, code, output });
}

const exitProcess = process.exit.bind(process);
process.exit = (code) => {
  if (run) finish(typeof code === 'number' ? code : Number(code ?? process.exitCode ?? 0));
  throw new Exited(code);
};

for (const stream of [process.stdout, process.stderr]) {
  stream.write = (chunk, encoding, callback) => {
    if (run) run.output += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    if (typeof encoding === 'function') encoding();
    else if (typeof callback === 'function') callback();
    return true;
  };
}

// A rejection nothing handles would end a CLI process with code 1 (Node's default); an `Exited`
// is the unwinding of a run already answered.
process.on('unhandledRejection', (reason) => {
  if (reason instanceof Exited) return;
  if (run) {
    run.output += `${reason instanceof Error ? reason.stack : String(reason)}\n`;
    finish(1);
  }
});
process.on('uncaughtException', (err) => {
  if (err instanceof Exited) return;
  if (run) {
    run.output += `${err.stack ?? String(err)}\n`;
    finish(1);
  }
});

process.on('message', async ({ id, args }) => {
  run = { id, output: '' };
  process.argv = [process.execPath, process.argv[1], ...args];
  try {
    await import(`${cli}?run=${id}`);
  } catch (err) {
    if (!(err instanceof Exited) && run) {
      run.output += `${err.stack ?? String(err)}\n`;
      finish(1);
    }
  }
});
// The test is gone (or closed the channel): so is this process.
process.on('disconnect', () => exitProcess(0));
