import { readFile } from 'node:fs/promises';
import { Command, CommanderError, Option } from 'commander';
import { isWireError, signingSettingsFromEnv } from '@toolgate/contracts';
import { registerApprovalCommands } from './commands/approvals-commands';
import { registerDispatchCommand } from './commands/dispatch-command';
import { registerPolicyCommands } from './commands/policy-commands';
import { registerToolsCommands } from './commands/tools-commands';
import { registerRunsCommands } from './commands/runs-commands';
import { registerJournalCommands } from './commands/journal-commands';
import { registerCompletionCommand } from './commands/completion-command';
import { registerKeysCommands } from './commands/keys-commands';
import { registerMcpCommands } from './commands/mcp-commands';
import { registerNatsConfCommands } from './commands/nats-conf-commands';
import type { BusSettings } from './bus/bus-connection';
import { journalPartitionsFromEnv, UsageError } from './commands/cli-input';
import { GatewayHttpClient, type FetchFn } from './http/gateway-http-client';
import {
  terminalProgress,
  type MaybeTerminal,
  type ProgressBar,
  type ProgressFactory,
} from './format/progress-bar';

/** Where the CLI writes and what it reads; `process` in `main.ts`, buffers in tests. */
export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: { write(text: string): unknown };
  /** Errors, and a progress bar when it is a terminal (`isTTY`). */
  stderr: MaybeTerminal;
  /** The HTTP client's fetch (default: the global one). */
  fetch?: FetchFn;
  /** Reads a file named on the command line (default: `fs.readFile` as UTF-8). */
  readFile?: (path: string) => Promise<string>;
  /** The clock for ages and expiries (default: now). */
  now?: () => Date;
  /** Progress displays of long commands (default: a bar on stderr when it is a terminal). */
  progress?: ProgressFactory;
  /** Aborted to stop a command that runs until stopped (`journal tail`): Ctrl-C in `main.ts`. */
  signal?: AbortSignal;
}

/** Exit codes: 0 ok, 1 an API error or a call that did not succeed, 2 bad input. */
export const ExitCode = { Ok: 0, Failed: 1, Usage: 2 } as const;

/** What every command gets: output, the gateway, the clock. */
export interface CommandContext {
  out(text: string): void;
  gateway(): GatewayHttpClient;
  /** A file named on the command line, as UTF-8; one that cannot be read is a `UsageError`. */
  readFile(path: string): Promise<string>;
  now(): Date;
  /** A line for the person at the terminal, not the output (stderr). */
  note(text: string): void;
  /** Where the bus is and who the operator is on it (the services' own variables). */
  busSettings(): BusSettings;
  /** Aborted when the command should stop (Ctrl-C). */
  signal: AbortSignal;
  /** A progress display for a long command, or undefined (stderr is not a terminal). */
  progress(label: string): Promise<ProgressBar | undefined>;
  /** Set by a command whose call went through but did not succeed (a denied dispatch). */
  fail(): void;
}

const DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * Runs one `toolgate` invocation in-process and returns its exit code. Never throws and never
 * calls `process.exit`, so tests drive it against a real gateway and read what it printed.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let token: string | undefined;
  // Belt and braces: nothing the CLI prints should contain the token, and this makes sure of it
  // even if an error message from somewhere echoes it.
  const natsPassword = io.env.NATS_PASSWORD;
  const redact = (text: string) => {
    let safe = token && token.length >= 6 ? text.split(token).join('***') : text;
    if (natsPassword && natsPassword.length >= 6) safe = safe.split(natsPassword).join('***');
    return safe;
  };
  const out = (text: string) => void io.stdout.write(redact(text));
  const err = (text: string) => void io.stderr.write(redact(text));
  let failed = false;

  const program = new Command('toolgate')
    .description(
      'Toolgate command line: approvals, tools, dispatches and policy over the gateway HTTP API.',
    )
    .addOption(new Option('--url <url>', 'gateway URL (env TOOLGATE_URL)'))
    .addOption(
      new Option('--token <token>', 'bearer token (env TOOLGATE_TOKEN); prefer the env variable'),
    )
    .exitOverride()
    .showHelpAfterError(false)
    .configureOutput({ writeOut: out, writeErr: err });

  const ctx: CommandContext = {
    out,
    gateway: () => {
      const opts = program.opts<{ url?: string; token?: string }>();
      token = opts.token ?? io.env.TOOLGATE_TOKEN;
      if (!token) throw new UsageError('no token: set TOOLGATE_TOKEN or pass --token');
      return new GatewayHttpClient(opts.url ?? io.env.TOOLGATE_URL ?? DEFAULT_URL, token, io.fetch);
    },
    readFile: async (path) => {
      try {
        return await (io.readFile ?? ((p) => readFile(p, 'utf8')))(path);
      } catch (err) {
        throw new UsageError(`cannot read ${path}: ${(err as Error).message}`);
      }
    },
    now: io.now ?? (() => new Date()),
    progress: io.progress ?? terminalProgress(io.stderr),
    note: err,
    busSettings: () => ({
      url: io.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      user: io.env.NATS_USER,
      password: io.env.NATS_PASSWORD,
      prefix: io.env.TOOLGATE_PREFIX ?? 'toolgate',
      journalPartitions: journalPartitionsFromEnv(io.env.TOOLGATE_JOURNAL_PARTITIONS),
      signing: signingSettingsFromEnv(io.env),
    }),
    signal: io.signal ?? new AbortController().signal,
    fail: () => {
      failed = true;
    },
  };
  registerApprovalCommands(program, ctx);
  registerToolsCommands(program, ctx);
  registerMcpCommands(program, ctx);
  registerDispatchCommand(program, ctx);
  registerPolicyCommands(program, ctx);
  registerRunsCommands(program, ctx);
  registerJournalCommands(program, ctx);
  registerKeysCommands(program, ctx);
  registerNatsConfCommands(program, ctx);
  registerCompletionCommand(program, ctx);
  for (const cmd of allCommands(program))
    cmd.exitOverride().configureOutput({ writeOut: out, writeErr: err });

  // Known as soon as argv is parsed, so even a usage error that echoes it is redacted.
  token = flagValue(argv, '--token') ?? io.env.TOOLGATE_TOKEN;
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return failed ? ExitCode.Failed : ExitCode.Ok;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version exit 0; every other parse error (unknown flag, missing argument) is usage.
      return e.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    }
    if (e instanceof UsageError) {
      err(`error: ${e.message}\n`);
      return ExitCode.Usage;
    }
    if (isWireError(e)) {
      err(`${e.code}: ${e.message}\n`);
      return ExitCode.Failed;
    }
    err(`internal: ${(e as Error)?.message ?? String(e)}\n`);
    return ExitCode.Failed;
  }
}

function allCommands(cmd: Command): Command[] {
  return cmd.commands.flatMap((c) => [c, ...allCommands(c)]);
}

function flagValue(argv: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === flag) return argv[i + 1];
    if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1);
  }
  return undefined;
}
