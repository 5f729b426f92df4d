import os from 'node:os';
import { ErrorCode } from '@toolgate/contracts';
import { Sandbox } from './sandbox';

it('refuses to open without bubblewrap, naming the Debian package', async () => {
  await expect(Sandbox.open({ bwrap: '/nonexistent/bwrap' })).rejects.toMatchObject({
    code: ErrorCode.Config,
    message: expect.stringContaining('"bubblewrap"'),
    details: { package: 'bubblewrap' },
  });
});

it('refuses to open without prlimit, naming the Debian package', async () => {
  await expect(Sandbox.open({ prlimit: '/nonexistent/prlimit' })).rejects.toMatchObject({
    code: ErrorCode.Config,
    details: { package: 'util-linux' },
  });
});

it('refuses a pids cgroup it cannot use, and a read-only path of the whole root', async () => {
  await expect(Sandbox.open({ pidsCgroup: os.tmpdir() })).rejects.toMatchObject({
    code: ErrorCode.Config,
    details: { field: 'pidsCgroup' },
  });
  await expect(Sandbox.open({ readOnlyPaths: ['/'] })).rejects.toMatchObject({
    code: ErrorCode.Config,
  });
});
