import { Slots } from './slots';

describe('Slots', () => {
  it('runs at most `size` tasks at once and the rest in arrival order', async () => {
    const slots = new Slots(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const gates = Array.from({ length: 5 }, () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, opened };
    });
    const runs = gates.map((gate, i) =>
      slots.run(async () => {
        started.push(i);
        running++;
        most = Math.max(most, running);
        await gate.opened;
        running--;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1]);
    gates[1]!.open();
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1, 2]);
    for (const gate of gates) gate.open();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it('frees the slot of a task that throws', async () => {
    const slots = new Slots(1);
    await expect(slots.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await slots.run(async () => 'next')).toBe('next');
  });

  it('drops a waiting task whose signal fires: it never starts, and the queue moves on', async () => {
    const slots = new Slots(1);
    let release!: () => void;
    const holder = slots.run(
      () => new Promise<string>((resolve) => (release = () => resolve('held'))),
    );
    const controller = new AbortController();
    const started: string[] = [];
    const dropped = slots.run(async () => void started.push('dropped'), controller.signal);
    const next = slots.run(async () => {
      started.push('next');
      return 'next';
    });
    controller.abort(new Error('deadline'));
    await expect(dropped).rejects.toThrow('deadline');
    release();
    expect(await holder).toBe('held');
    expect(await next).toBe('next');
    expect(started).toEqual(['next']);
    // The slot came back once, not twice: one task at a time still.
    let running = 0;
    let most = 0;
    await Promise.all(
      [1, 2, 3].map(() =>
        slots.run(async () => {
          most = Math.max(most, ++running);
          await new Promise((r) => setImmediate(r));
          running--;
        }),
      ),
    );
    expect(most).toBe(1);
  });

  it('never starts a task whose signal has fired already', async () => {
    const slots = new Slots(1);
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    let ran = false;
    await expect(
      slots.run(async () => {
        ran = true;
      }, controller.signal),
    ).rejects.toThrow('gone');
    expect(ran).toBe(false);
  });
});
