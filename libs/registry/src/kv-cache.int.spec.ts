import { eventually, useTestNats, type TestNats } from '@toolgate/testing';
import { KvCache } from './kv-cache';

describe('KvCache on a real KV bucket', () => {
  let t: TestNats;
  beforeAll(async () => {
    t = await useTestNats('kvcache');
  });
  afterAll(() => t?.cleanup());

  it('is ready on an empty bucket, then mirrors puts, deletes and unparseable values', async () => {
    const cache = await KvCache.open<{ n: number }>(t.nc, `${t.prefix}_cache`, (raw) =>
      typeof (raw as { n?: unknown })?.n === 'number' ? (raw as { n: number }) : null,
    );
    try {
      expect(cache.list()).toEqual([]);
      const rev = await cache.bucket().put('a.one', JSON.stringify({ n: 1 }));
      await cache.waitFor('a.one', rev);
      expect(cache.get('a.one')).toEqual({ value: { n: 1 }, revision: rev });

      await cache.bucket().put('b.two', JSON.stringify({ n: 'two' }));
      await cache.bucket().put('a.three', 'not json');
      const last = await cache.bucket().put('a.four', JSON.stringify({ n: 4 }));
      await cache.waitFor('a.four', last);
      expect(cache.get('b.two')).toBeUndefined();
      expect(cache.get('a.three')).toBeUndefined();
      expect(
        cache
          .list('a.')
          .map(([key]) => key)
          .sort(),
      ).toEqual(['a.four', 'a.one']);

      await cache.bucket().delete('a.one');
      await eventually(() => (cache.get('a.one') === undefined ? true : undefined), {
        what: 'the delete',
      });
    } finally {
      cache.stop();
    }
  });

  it('write reads its own write at once, and create/update refuse a key that has moved on', async () => {
    const cache = await KvCache.open<{ n: number }>(t.nc, `${t.prefix}_write`, (raw) =>
      typeof (raw as { n?: unknown })?.n === 'number' ? (raw as { n: number }) : null,
    );
    try {
      const first = await cache.write('k', { n: 1 }, 0);
      expect(cache.get('k')).toEqual({ value: { n: 1 }, revision: first });
      await expect(cache.write('k', { n: 2 }, 0)).rejects.toThrow();
      const second = await cache.write('k', { n: 2 }, first);
      expect(cache.get('k')).toEqual({ value: { n: 2 }, revision: second });
      await expect(cache.write('k', { n: 3 }, first)).rejects.toThrow();
      const third = await cache.write('k', { n: 3 });
      expect(cache.get('k')).toEqual({ value: { n: 3 }, revision: third });
    } finally {
      cache.stop();
    }
  });

  it('is ready with the current values of a bucket that has some', async () => {
    const bucket = `${t.prefix}_filled`;
    const writer = await KvCache.open<number>(t.nc, bucket, (raw) =>
      typeof raw === 'number' ? raw : null,
    );
    await writer.bucket().put('x', '1');
    await writer.bucket().put('y', '2');
    writer.stop();
    const cache = await KvCache.open<number>(t.nc, bucket, (raw) =>
      typeof raw === 'number' ? raw : null,
    );
    try {
      expect(cache.list().map(([key, { value }]) => [key, value])).toEqual([
        ['x', 1],
        ['y', 2],
      ]);
    } finally {
      cache.stop();
    }
  });
});
