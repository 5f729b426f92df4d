import { describeInFlight, drainWithin, loadDrainSettings } from './drain';

const NOW = 1_000_000;
const message = (type: string, key: string, ageMs: number, seq = 1) => ({
  subject: `toolgate.journal.acme.run-1.${key}.${type}`,
  seq,
  sinceMs: NOW - ageMs,
});

describe('describeInFlight', () => {
  it('names each message by event type, dispatch, run and tenant, oldest first', () => {
    expect(
      describeInFlight([message('resolved', 'd2', 2_000), message('decided', 'd1', 12_400)], NOW),
    ).toBe(
      '2 in flight: decided of d1 (run run-1, tenant acme) for 12 s; resolved of d2 (run run-1, tenant acme) for 2 s',
    );
  });

  it('lists five and counts the rest', () => {
    const many = Array.from({ length: 8 }, (_, i) => message('decided', `d${i}`, 1000 * (8 - i)));
    const line = describeInFlight(many, NOW);
    expect(line).toMatch(/^8 in flight: decided of d0 .* and 3 more$/);
    expect(line.split('; ')).toHaveLength(5);
  });

  it('says so when nothing is in flight', () => {
    expect(describeInFlight([], NOW)).toBe('nothing in flight');
  });
});

describe('drainWithin', () => {
  it('reports drained when the stop finishes, after saying what it waits for', async () => {
    const lines: string[] = [];
    const ending = await drainWithin(
      { stop: async () => undefined, inFlight: () => [message('decided', 'd1', 0)] },
      { capMs: 60_000, log: (l) => lines.push(l), now: () => NOW },
    );
    expect(ending).toBe('drained');
    expect(lines).toEqual([
      'draining (at most 60 s): 1 in flight: decided of d1 (run run-1, tenant acme) for 0 s',
    ]);
  });

  it('gives up at the cap with what is still in flight, and repeats the wait meanwhile', async () => {
    const lines: string[] = [];
    const ending = await drainWithin(
      {
        stop: () => new Promise<void>(() => undefined),
        inFlight: () => [message('decided', 'd1', 0)],
      },
      { capMs: 120, reportEveryMs: 20, log: (l) => lines.push(l), now: () => NOW },
    );
    expect(ending).toBe('capped');
    expect(lines[0]).toMatch(/^draining \(at most 0.1 s\): 1 in flight: decided of d1/);
    expect(lines.some((l) => l.startsWith('still draining: 1 in flight: decided of d1'))).toBe(
      true,
    );
    expect(lines[lines.length - 1]).toMatch(
      /^drain cap of 0.1 s reached with 1 in flight: decided of d1 .*redelivered to another replica/,
    );
  });
});

describe('drainWithin with work to abandon', () => {
  it('abandons at the cap, then waits for the stop to end', async () => {
    const steps: string[] = [];
    let stopped!: () => void;
    const ending = await drainWithin(
      {
        stop: () =>
          new Promise<void>((resolve) => {
            stopped = () => {
              steps.push('stopped');
              resolve();
            };
          }),
        inFlight: () => [message('decided', 'd1', 0)],
        abandon: async () => {
          steps.push('abandon');
          // The stop ends once its in-flight work is handed back.
          setImmediate(stopped);
        },
      },
      { capMs: 50, log: (l) => steps.push(l), now: () => NOW },
    );
    expect(ending).toBe('capped');
    expect(steps.slice(1)).toEqual([
      expect.stringMatching(
        /^drain cap of 0.1 s reached with 1 in flight: decided of d1 .*stopping what still runs .*handed back and redelivered to another replica/,
      ),
      'abandon',
      'stopped',
    ]);
  });

  it('never abandons a stop that finishes within the cap', async () => {
    let abandoned = false;
    const ending = await drainWithin(
      {
        stop: async () => undefined,
        abandon: async () => {
          abandoned = true;
        },
      },
      { capMs: 60_000, log: () => undefined },
    );
    expect(ending).toBe('drained');
    expect(abandoned).toBe(false);
  });
});

describe('loadDrainSettings', () => {
  it('defaults to 30 s and reads TOOLGATE_DRAIN_TIMEOUT_MS', () => {
    expect(loadDrainSettings({})).toEqual({ capMs: 30_000 });
    expect(loadDrainSettings({ TOOLGATE_DRAIN_TIMEOUT_MS: '5000' })).toEqual({ capMs: 5000 });
  });

  it('refuses a value that is not a non-negative whole number of milliseconds', () => {
    for (const bad of ['soon', '-1', '1.5'])
      expect(() => loadDrainSettings({ TOOLGATE_DRAIN_TIMEOUT_MS: bad })).toThrow(
        expect.objectContaining({ code: 'config' }),
      );
  });
});
