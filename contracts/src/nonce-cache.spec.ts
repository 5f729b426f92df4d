import { NonceCache } from './index';

describe('the nonce cache of signed requests', () => {
  const t0 = 1_700_000_000_000;

  it('refuses a second use of a nonce until it expires, and forgets it after', () => {
    const cache = new NonceCache(10);
    const expires = t0 + 60_000;
    expect(cache.use('gateway n1', expires, t0)).toBe('first');
    expect(cache.use('gateway n1', expires, t0 + 1)).toBe('replayed');
    expect(cache.use('gateway n1', expires, expires)).toBe('replayed');
    // Another signer's nonce with the same value is another request.
    expect(cache.use('ops n1', expires, t0)).toBe('first');
    // Past its expiry the nonce is dropped (its request is stale by then anyway).
    expect(cache.use('gateway n2', expires + 1000, expires + 1)).toBe('first');
    expect(cache.size).toBe(1);
    expect(cache.use('gateway n1', expires, expires + 1)).toBe('first');
  });

  it('keeps a nonce signed ahead of the clock until its own expiry, not the earlier ones', () => {
    const cache = new NonceCache(10);
    cache.use('gateway early', t0 + 60_000, t0);
    cache.use('gateway ahead', t0 + 119_000, t0); // signed 59 s in the future
    expect(cache.use('gateway x', t0 + 200_000, t0 + 61_000)).toBe('first');
    expect(cache.use('gateway early', t0 + 60_000, t0 + 61_000)).toBe('first');
    expect(cache.use('gateway ahead', t0 + 119_000, t0 + 119_000)).toBe('replayed');
  });

  it('when full of unexpired nonces, refuses a new one rather than forget an old one', () => {
    const cache = new NonceCache(3);
    for (const n of ['a', 'b', 'c']) expect(cache.use(n, t0 + 60_000, t0)).toBe('first');
    expect(cache.use('d', t0 + 60_000, t0 + 10)).toBe('full');
    // The refused one is not held, and every held one is still a replay.
    expect(cache.size).toBe(3);
    for (const n of ['a', 'b', 'c']) expect(cache.use(n, t0 + 60_000, t0 + 20)).toBe('replayed');
    // Room comes back as they expire.
    expect(cache.use('d', t0 + 130_000, t0 + 60_001)).toBe('first');
    expect(cache.size).toBe(1);
  });
});
