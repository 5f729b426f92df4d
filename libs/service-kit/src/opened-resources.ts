/**
 * What a start-up has opened so far (connections, watchers, pools, an application), so that a
 * start-up failing part-way closes them, newest first, before it throws: a retried start-up then
 * begins clean instead of leaving a connection reconnecting forever or a consumer running twice.
 */
export class OpenedResources {
  private readonly closers: (() => unknown)[] = [];

  /** Records how to close `resource` and returns it. */
  add<T>(resource: T, close: (resource: T) => unknown): T {
    this.closers.push(() => close(resource));
    return resource;
  }

  /** Closes everything recorded, newest first; one close failing does not keep the others open. */
  async closeAll(): Promise<void> {
    while (this.closers.length) {
      try {
        await this.closers.pop()!();
      } catch {
        // Best effort: the start-up's own failure is the one worth reporting.
      }
    }
  }
}

/**
 * Runs a start-up that records what it opens; if it throws, everything recorded is closed before
 * the failure propagates.
 */
export async function startClean<T>(start: (opened: OpenedResources) => Promise<T>): Promise<T> {
  const opened = new OpenedResources();
  try {
    return await start(opened);
  } catch (err) {
    await opened.closeAll();
    throw err;
  }
}
