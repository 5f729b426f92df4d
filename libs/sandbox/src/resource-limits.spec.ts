import { DEFAULT_LIMITS, effectiveLimits, prlimitArgv } from './resource-limits';

it('lets a request lower a limit but never raise one', () => {
  expect(
    effectiveLimits(DEFAULT_LIMITS, {
      cpuSeconds: 5,
      processes: 10_000,
      openFiles: 0,
    }),
  ).toEqual({ ...DEFAULT_LIMITS, cpuSeconds: 5 });
  expect(effectiveLimits(DEFAULT_LIMITS, undefined)).toEqual(DEFAULT_LIMITS);
});

it('sets every limit soft and hard, with one second of SIGXCPU grace on CPU', () => {
  expect(
    prlimitArgv('/usr/bin/prlimit', {
      cpuSeconds: 10,
      addressSpaceBytes: 1024 * 1024 * 1024,
      openFiles: 64,
      processes: 32,
      fileSizeBytes: 1000.7,
    }),
  ).toEqual([
    '/usr/bin/prlimit',
    '--cpu=10:11',
    '--as=1073741824',
    '--nofile=64',
    '--nproc=32',
    '--fsize=1000',
    '--',
  ]);
});

it('leaves RLIMIT_AS unset when a memory cgroup limits the run as a whole', () => {
  const argv = prlimitArgv('prlimit', DEFAULT_LIMITS, { addressSpace: false });
  expect(argv.some((a) => a.startsWith('--as'))).toBe(false);
  expect(argv).toContain(`--nproc=${DEFAULT_LIMITS.processes}`);
});
