import { Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { assertSendable, isTransitionTaken, whilePeersJoin } from '@toolgate/bus';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One cached KV entry: its parsed value and the revision it was written at. */
export interface Revisioned<T> {
  value: T;
  revision: number;
}

/**
 * A write refused because the key is no longer at the revision it expected (the broker's
 * wrong-last-sequence answer): someone else wrote it first. Any other failure of a write (the
 * broker away, no answer in time) is not this, and stays what it is.
 */
export class KvRevisionConflict extends Error {
  override readonly name = 'KvRevisionConflict';
}

/**
 * A KV bucket mirrored in memory by a watch, so hot paths read without a round trip and changes
 * (hot reload) arrive as they are written. `ready` resolves once the initial values are loaded.
 */
export class KvCache<T> {
  private readonly entries = new Map<string, Revisioned<T>>();
  private watcher: { stop(): void } | undefined;
  private readonly waiters = new Set<() => void>();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly name: string,
    private readonly kv: KV,
    private readonly parse: (raw: unknown) => T | null,
  ) {}

  /** Opens (creating when missing) the bucket and starts mirroring it. */
  static async open<T>(
    nc: NatsConnection,
    bucket: string,
    parse: (raw: unknown) => T | null,
    options: { history?: number; replicas?: number } = {},
  ): Promise<KvCache<T>> {
    const kv = await whilePeersJoin(() =>
      new Kvm(nc).create(bucket, {
        history: options.history ?? 5,
        replicas: options.replicas ?? 1,
      }),
    );
    const cache = new KvCache<T>(nc, bucket, kv, parse);
    await cache.start();
    return cache;
  }

  private async start(): Promise<void> {
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    // The watcher delivers the current values first; `delta` counts down to 0 on the last of them.
    // An empty bucket delivers nothing, so ask for its size up front.
    const status = await this.kv.status();
    if (status.values === 0) markReady();
    const iter = await this.kv.watch({ key: '>' });
    this.watcher = iter;
    void (async () => {
      for await (const entry of iter) {
        this.apply(entry);
        if (!entry.delta) markReady();
      }
    })().catch(() => undefined);
    await ready;
  }

  private apply(entry: KvWatchEntry): void {
    if (entry.operation !== 'PUT') {
      this.entries.delete(entry.key);
    } else {
      try {
        const value = this.parse(JSON.parse(decoder.decode(entry.value)));
        if (value !== null) this.entries.set(entry.key, { value, revision: entry.revision });
      } catch {
        // A value that does not parse is ignored, as if absent: readers fail closed on absence.
      }
    }
    for (const wake of this.waiters) wake();
  }

  /**
   * The bucket itself, for a read or write past the mirror. Throws at once while the connection is
   * down (`assertSendable`): the client would drop the request on reconnecting.
   */
  bucket(): KV {
    assertSendable(this.nc, `a request to the ${this.name} bucket`);
    return this.kv;
  }

  get(key: string): Revisioned<T> | undefined {
    return this.entries.get(key);
  }

  /** Entries whose key starts with `prefix`. */
  list(prefix = ''): [string, Revisioned<T>][] {
    return [...this.entries].filter(([k]) => k.startsWith(prefix));
  }

  /**
   * Writes `value` as JSON under `key` and waits until the mirror has it, so the writer reads its
   * own write. Without `expectedRevision` it overwrites; with 0 it only creates, with n it only
   * replaces revision n (either throws {@link KvRevisionConflict} when the key has moved on).
   */
  async write(key: string, value: unknown, expectedRevision?: number): Promise<number> {
    const body = encoder.encode(JSON.stringify(value));
    const kv = this.bucket();
    let revision: number;
    try {
      revision =
        expectedRevision === undefined
          ? await kv.put(key, body)
          : expectedRevision === 0
            ? await kv.create(key, body)
            : await kv.update(key, body, expectedRevision);
    } catch (err) {
      if (!isTransitionTaken(err)) throw err;
      throw new KvRevisionConflict(`${key} is no longer at revision ${expectedRevision}`, {
        cause: err,
      });
    }
    await this.waitFor(key, revision);
    return revision;
  }

  /** Deletes `key` and waits until the mirror has dropped it, so the writer reads its own delete. */
  async remove(key: string): Promise<void> {
    await this.bucket().delete(key);
    const deadline = Date.now() + 5000;
    while (this.entries.has(key) && Date.now() <= deadline) {
      await this.change();
    }
  }

  /** Waits until the cache has caught up with at least `revision` for `key` (after our own write). */
  async waitFor(key: string, revision: number, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.entries.get(key)?.revision ?? 0) < revision) {
      if (Date.now() > deadline) return;
      await this.change();
    }
  }

  /** Resolves at the mirror's next change, or after 50 ms (the callers re-check their deadline). */
  private change(): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        this.waiters.delete(wake);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(wake, 50);
      this.waiters.add(wake);
    });
  }

  stop(): void {
    this.watcher?.stop();
  }
}
