/**
 * Limits per run, not per process, proved with real bubblewrap on this machine's cgroups: a run's
 * writable tmpfs all have a size (`/dev/shm` included, `/dev` itself takes nothing), and one memory
 * limit holds the whole process tree however many processes it forks (issue 23, finding 4).
 */
import { sandboxSpec } from '../test/sandbox-spec';
import { MemoryCgroup, Sandbox } from './index';

const PATH = '/usr/bin:/bin';
const MIB = 1024 * 1024;
const spec = sandboxSpec({
  prefix: 'tg-limits-',
  open: { tmpBytes: 64 * MIB },
  run: { timeoutMs: 30_000 },
});
const { sh } = spec;

/** Bytes a `head -c` into `file` managed to write, as `ls -l` sees them afterwards. */
const fill = (file: string, bytes: number) =>
  `head -c ${bytes} /dev/zero > ${file} 2>/dev/null; stat -c %s ${file} 2>/dev/null || echo 0; rm -f ${file}`;

it('stops a write of 300 MB to /dev/shm at its size, and /dev itself holds nothing', async () => {
  const result = await sh(
    `${fill('/dev/shm/big', 300 * MIB)}; echo x > /dev/planted || echo dev-read-only; echo ok > /dev/null && echo null-ok`,
    // Enough memory for the 64 MiB /dev/shm: the size stops the write, not the memory limit.
    { limits: { addressSpaceBytes: 512 * MIB } },
  );
  const [written, devLine, nullLine] = result.stdout.text().trim().split('\n');
  expect(Number(written)).toBeLessThanOrEqual(64 * MIB);
  expect(Number(written)).toBeGreaterThan(0);
  expect(devLine).toBe('dev-read-only');
  expect(nullLine).toBe('null-ok');
});

it('sizes /dev/shm and /tmp as configured, and /tmp and /dev/shm both count', async () => {
  const small = await Sandbox.open({ tmpBytes: 8 * MIB, shmBytes: 4 * MIB });
  const result = await small.run({
    argv: ['/bin/sh', '-c', `${fill('/dev/shm/f', 32 * MIB)}; ${fill('/tmp/f', 32 * MIB)}`],
    cwd: spec.work,
    env: { PATH },
    timeoutMs: 30_000,
    maxOutputBytes: 4096,
  });
  expect(result.stdout.text().trim().split('\n').map(Number)).toEqual([4 * MIB, 8 * MIB]);
});

describe('one memory limit for the whole tree', () => {
  /**
   * Six children each touch 30 MiB and hold it for four seconds; the survivors print. Survivors
   * held their memory at the same time (every allocation is done before the first one wakes).
   */
  const sixChildren =
    'for i in 1 2 3 4 5 6; do ' +
    `perl -e 'my $b = ""; vec($b, 30 * 1024 * 1024 - 1, 8) = 1; sleep 4; print "held\\n"' & ` +
    'done; wait';

  it('lets six children of a 64 MiB tool hold 64 MiB together at most', async () => {
    expect(await MemoryCgroup.open(undefined)).not.toBeNull();
    const result = await sh(sixChildren, { limits: { addressSpaceBytes: 64 * MIB } });
    const held = result.stdout
      .text()
      .split('\n')
      .filter((l) => l === 'held').length;
    expect(held * 30 * MIB).toBeLessThanOrEqual(64 * MIB);
  });

  it('lets them all hold it under a limit that fits them (the probe holds memory)', async () => {
    const result = await sh(sixChildren, { limits: { addressSpaceBytes: 512 * MIB } });
    expect(
      result.stdout
        .text()
        .split('\n')
        .filter((l) => l === 'held'),
    ).toHaveLength(6);
  });
});
