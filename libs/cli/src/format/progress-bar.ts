/** A progress display for a long command (a what-if, a rebuild): updated, then stopped. */
export interface ProgressBar {
  update(done: number, total: number): void;
  stop(): void;
}

/** Makes the progress display of a command, or none (not a terminal, or a test). */
export type ProgressFactory = (label: string) => Promise<ProgressBar | undefined>;

/** A stream that may be a terminal (`process.stderr`). */
export interface MaybeTerminal {
  write(text: string): unknown;
  isTTY?: boolean;
}

/**
 * A `cli-progress` bar on `stream` when it is a terminal, and nothing otherwise: piped into a file
 * or another program, progress would only be noise. The library is loaded only when a bar is
 * drawn, so commands without one do not pay for it.
 */
export function terminalProgress(stream: MaybeTerminal): ProgressFactory {
  return async (label) => {
    if (stream.isTTY !== true) return undefined;
    const { SingleBar, Presets } = await import('cli-progress');
    const bar = new SingleBar(
      {
        format: `${label} [{bar}] {percentage}% | {value}/{total} | {eta_formatted} left`,
        stream: stream as NodeJS.WritableStream,
        hideCursor: true,
        clearOnComplete: true,
        etaBuffer: 50,
      },
      Presets.shades_classic,
    );
    let started = false;
    return {
      update(done, total) {
        if (!started) {
          bar.start(Math.max(total, 1), done);
          started = true;
          return;
        }
        bar.setTotal(Math.max(total, 1));
        bar.update(done);
      },
      stop() {
        if (started) bar.stop();
      },
    };
  };
}
