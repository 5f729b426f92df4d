import { runCli, type CliIo } from '../src/run-cli';

/** What a {@link runCaptured} run exited with and wrote. */
export interface CapturedRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `toolgate argv` in process with stdout and stderr captured, and `io` for the rest (an empty
 * environment unless it gives one): what every CLI spec starts from.
 */
export async function runCaptured(
  argv: string[],
  io: Partial<Omit<CliIo, 'stdout' | 'stderr'>> = {},
): Promise<CapturedRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    env: {},
    ...io,
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  });
  return { code, stdout, stderr };
}
