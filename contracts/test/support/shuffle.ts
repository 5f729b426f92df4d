/**
 * Test support: rebuilds a JSON value with every object's keys in a pseudo-random order chosen by
 * `seed`, so key-order independence can be checked as a property. Not exported from the package.
 */
export function deepShuffleKeys<T>(value: T, seed: number): T {
  const next = mulberry32(seed);
  const go = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(go);
    if (typeof v !== 'object' || v === null) return v;
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    // fromEntries defines own data properties, so a "__proto__" key stays a plain key.
    return Object.fromEntries(entries.map(([k, x]) => [k, go(x)]));
  };
  return go(value) as T;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
