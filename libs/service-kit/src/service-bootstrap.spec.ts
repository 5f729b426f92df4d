import { stopOnce } from './service-bootstrap';

describe('stopOnce', () => {
  it('runs the stop once, however often and however concurrently it is called', async () => {
    let calls = 0;
    const stop = stopOnce(async () => {
      calls++;
      await Promise.resolve();
    });
    const first = stop();
    const second = stop();
    expect(second).toBe(first);
    await Promise.all([first, second, stop()]);
    await stop();
    expect(calls).toBe(1);
  });

  it('a failed stop is not retried: every caller sees the same failure', async () => {
    let calls = 0;
    const stop = stopOnce(() => {
      calls++;
      return Promise.reject(new Error('drain failed'));
    });
    await expect(stop()).rejects.toThrow('drain failed');
    await expect(stop()).rejects.toThrow('drain failed');
    expect(calls).toBe(1);
  });
});
