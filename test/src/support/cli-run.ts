import { runCli, type CliIo } from '@toolgate/cli';
import { eventually } from '@toolgate/testing';

/** What one in-process CLI run returned and printed. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI in this process (its real entry, `runCli`) with `env` and anything else of its I/O
 * (`io`), capturing what it prints.
 */
export async function runCliCaptured(
  argv: string[],
  env: CliIo['env'],
  io: Partial<Omit<CliIo, 'env' | 'stdout' | 'stderr'>> = {},
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    ...io,
    env,
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  });
  return { code, stdout, stderr };
}

/** The objects of a command's JSON-lines output (`journal tail --json`), one per line. */
export function jsonLines(stdout: string): any[] {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/**
 * `toolgate journal stats --json` (as an operator with `env`) once every durable consumer has
 * nothing left to deliver or acknowledge: what the journal holds, all of it folded.
 */
export function journalStatsCaughtUp(env: CliIo['env']): Promise<any> {
  return eventually(async () => {
    const r = await runCliCaptured(['journal', 'stats', '--json'], env);
    if (r.code !== 0 || r.stderr !== '')
      throw new Error(`journal stats failed (exit ${r.code}): ${r.stderr}`);
    const body = JSON.parse(r.stdout);
    return body.consumers.every((c: { lag: number; inFlight: number }) => c.lag + c.inFlight === 0)
      ? body
      : undefined;
  });
}
