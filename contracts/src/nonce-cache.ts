/** What {@link NonceCache.use} found: a first use (now remembered), a second one, or no room. */
export type NonceUse = 'first' | 'replayed' | 'full';

/**
 * The nonces of the signed requests a responder has accepted, each remembered until the moment
 * after which its request is refused as stale anyway (its signed-at plus the allowed age), so a
 * captured request cannot be answered twice within that window. Pure: the caller passes the clock.
 *
 * Memory is bounded twice. Expired nonces are dropped in buckets of one second of expiry (a sweep
 * at most once a second walks the buckets, not the nonces; a nonce may outlive its expiry by under
 * a second, which refuses nothing a fresh request could be). And at most `capacity` nonces are
 * held: when that many unexpired ones are, a new request is refused (`full`) rather than an old
 * nonce evicted. Why fail closed: every external call that reads the journal makes the gateway
 * sign a query, so the rate of signed requests is the callers' to drive; evicting the oldest entry
 * would let whoever captured a request flush its nonce out with cheap traffic and then replay it,
 * silently. Refusing instead turns the same flood into refused requests, which the caller sees and
 * retries (`unavailable`), and it only happens past the rate the capacity was sized for.
 */
export class NonceCache {
  private readonly held = new Set<string>();
  /** Nonces by the second their expiry falls in (rounded up): dropped once it has passed. */
  private readonly byExpirySecond = new Map<number, string[]>();
  private sweptThrough = -Infinity;

  constructor(readonly capacity: number) {}

  /** How many nonces are held (expired ones not yet swept included). */
  get size(): number {
    return this.held.size;
  }

  /**
   * Records a use of `key` that stays refusable until `expiresAtMs`: `first` when it was not held
   * (it is now), `replayed` when it was, `full` when it was not and there is no room (not held).
   */
  use(key: string, expiresAtMs: number, nowMs: number): NonceUse {
    this.sweep(nowMs);
    if (this.held.has(key)) return 'replayed';
    if (this.held.size >= this.capacity) return 'full';
    this.held.add(key);
    const second = Math.ceil(expiresAtMs / 1000);
    const bucket = this.byExpirySecond.get(second);
    if (bucket) bucket.push(key);
    else this.byExpirySecond.set(second, [key]);
    return 'first';
  }

  /** Drops the buckets whose every nonce expired before `nowMs` (at most once a second). */
  private sweep(nowMs: number): void {
    // Bucket s holds expiries in ((s - 1) s, s s]: all passed once nowMs > s * 1000.
    const through = Math.ceil(nowMs / 1000) - 1;
    if (through <= this.sweptThrough) return;
    this.sweptThrough = through;
    for (const [second, keys] of this.byExpirySecond) {
      if (second > through) continue;
      for (const key of keys) this.held.delete(key);
      this.byExpirySecond.delete(second);
    }
  }
}
