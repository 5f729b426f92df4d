/**
 * Runs tasks one at a time per key, in arrival order, and tasks of different keys concurrently.
 * Git operations that touch a repository's shared state (`git worktree add` locks the repository's
 * worktree metadata and writes refs) are serialised per repository with it; operations on one
 * worktree are serialised per worktree id, and acquires per agent key, which is what makes a
 * repeated acquire return the tree the first one made instead of racing it.
 */
export class KeyedSerialQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    // The tail never rejects, so one failed task does not poison the ones queued after it.
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
