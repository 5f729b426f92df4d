import { KeyedSerialQueue } from './keyed-serial-queue';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('KeyedSerialQueue', () => {
  it('runs tasks of one key one at a time in order, and other keys alongside', async () => {
    const queue = new KeyedSerialQueue();
    const log: string[] = [];
    const task = (name: string) => async () => {
      log.push(`start ${name}`);
      await tick();
      await tick();
      log.push(`end ${name}`);
      return name;
    };
    const results = await Promise.all([
      queue.run('a', task('a1')),
      queue.run('a', task('a2')),
      queue.run('b', task('b1')),
    ]);
    expect(results).toEqual(['a1', 'a2', 'b1']);
    expect(log.indexOf('end a1')).toBeLessThan(log.indexOf('start a2'));
    expect(log.indexOf('start b1')).toBeLessThan(log.indexOf('end a1'));
  });

  it('keeps going after a failed task', async () => {
    const queue = new KeyedSerialQueue();
    const failed = queue.run('k', async () => {
      throw new Error('boom');
    });
    const next = queue.run('k', async () => 'ok');
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('ok');
  });
});
