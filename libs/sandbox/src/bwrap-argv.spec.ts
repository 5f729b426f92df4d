import { bwrapArgv, type HostLayout, type SandboxPlan } from './bwrap-argv';

const layout: HostLayout = {
  entries: [
    { kind: 'bind', path: '/usr' },
    { kind: 'symlink', path: '/bin', target: 'usr/bin' },
    { kind: 'bind', path: '/etc/passwd' },
  ],
};
const plan: SandboxPlan = {
  cwd: '/work/repo',
  cwdWritable: true,
  readOnlyPaths: [],
  protectedPaths: ['/work/repo/.git'],
  network: false,
  tmpBytes: 1024 * 1024,
};

/** The value following `flag` each time it occurs (pairs for two-argument flags). */
function occurrences(args: string[], flag: string, arity = 1): string[][] {
  const found: string[][] = [];
  args.forEach((a, i) => {
    if (a === flag) found.push(args.slice(i + 1, i + 1 + arity));
  });
  return found;
}

it('unshares every namespace, drops capabilities and dies with its parent', () => {
  const args = bwrapArgv('/usr/bin/bwrap', layout, plan, {});
  expect(args[0]).toBe('/usr/bin/bwrap');
  expect(args).toEqual(
    expect.arrayContaining([
      '--unshare-all',
      '--unshare-user',
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
    ]),
  );
  expect(occurrences(args, '--cap-drop')).toEqual([['ALL']]);
  expect(args).not.toContain('--share-net');
  expect(args.at(-1)).toBe('--');
  expect(occurrences(args, '--chdir')).toEqual([['/work/repo']]);
});

it('sets the command environment inside the sandbox, starting from nothing', () => {
  const args = bwrapArgv('bwrap', layout, plan, { PATH: '/usr/bin', LD_PRELOAD: '/x.so' });
  const env = args.slice(args.indexOf('--clearenv'), args.indexOf('--chdir'));
  expect(env).toEqual([
    '--clearenv',
    '--setenv',
    'PATH',
    '/usr/bin',
    '--setenv',
    'LD_PRELOAD',
    '/x.so',
  ]);
});

it('shares the network only when the plan says so', () => {
  expect(bwrapArgv('bwrap', layout, { ...plan, network: true }, {})).toContain('--share-net');
});

it('reproduces the host layout read-only: binds and symlinks, nothing writable', () => {
  const args = bwrapArgv('bwrap', layout, plan, {});
  expect(occurrences(args, '--ro-bind', 2)).toEqual(
    expect.arrayContaining([
      ['/usr', '/usr'],
      ['/etc/passwd', '/etc/passwd'],
    ]),
  );
  expect(occurrences(args, '--symlink', 2)).toEqual([['usr/bin', '/bin']]);
  expect(occurrences(args, '--bind', 2)).toEqual([['/work/repo', '/work/repo']]);
});

it('mounts a fresh /proc, a read-only minimal /dev, a sized /dev/shm and a sized private /tmp', () => {
  const args = bwrapArgv('bwrap', layout, { ...plan, shmBytes: 2 * 1024 * 1024 }, {});
  expect(occurrences(args, '--proc')).toEqual([['/proc']]);
  const dev = args.indexOf('--dev');
  expect(args.slice(dev, dev + 14)).toEqual([
    '--dev',
    '/dev',
    '--perms',
    '1777',
    '--size',
    String(2 * 1024 * 1024),
    '--tmpfs',
    '/dev/shm',
    // After /dev/shm is mounted on it: bubblewrap cannot size /dev's own tmpfs.
    '--remount-ro',
    '/dev',
    '--perms',
    '1777',
    '--size',
    String(1024 * 1024),
  ]);
  expect(occurrences(args, '--tmpfs')).toEqual([['/dev/shm'], ['/tmp']]);
  // Without a size of its own, /dev/shm gets /tmp's.
  const unsized = bwrapArgv('bwrap', layout, plan, {});
  const shm = unsized.indexOf('/dev/shm');
  expect(unsized.slice(shm - 3, shm)).toEqual(['--size', String(1024 * 1024), '--tmpfs']);
});

it('binds cwd after /tmp and its read-only parents, and protected paths over cwd', () => {
  const args = bwrapArgv(
    'bwrap',
    layout,
    {
      ...plan,
      cwd: '/tmp/w/repo',
      readOnlyPaths: ['/tmp/w/repo/docs', '/tmp/w', '/opt/tools'],
      protectedPaths: ['/tmp/w/repo/.git', '/tmp/w/repo/.env', '/tmp/w/repo/.vscode/settings.json'],
      ancestorPaths: ['/tmp/w/repo/.vscode'],
    },
    {},
  );
  const after = args.slice(args.lastIndexOf('--tmpfs'));
  const binds = after.flatMap((a, i) =>
    a === '--bind' || a === '--ro-bind'
      ? [`${a} ${after[i + 1]}`]
      : a === '--ro-bind-fd' || a === '--bind-fd'
        ? [`${a} ${after[i + 1]} ${after[i + 2]}`]
        : [],
  );
  expect(binds).toEqual([
    '--ro-bind /tmp/w',
    '--ro-bind /opt/tools',
    '--bind /tmp/w/repo',
    '--ro-bind /tmp/w/repo/docs',
    // Protected paths from the descriptors the caller opened, fd 3 for the first and so on.
    '--ro-bind-fd 3 /tmp/w/repo/.git',
    '--ro-bind-fd 4 /tmp/w/repo/.env',
    // The directory on the way to one, onto itself (writable as cwd is), before what it holds.
    '--bind-fd 6 /tmp/w/repo/.vscode',
    '--ro-bind-fd 5 /tmp/w/repo/.vscode/settings.json',
  ]);
  const readOnly = bwrapArgv(
    'bwrap',
    layout,
    {
      ...plan,
      cwdWritable: false,
      protectedPaths: ['/work/repo/a/.env'],
      ancestorPaths: ['/work/repo/a'],
    },
    {},
  );
  expect(occurrences(readOnly, '--ro-bind-fd', 2)).toEqual([
    ['4', '/work/repo/a'],
    ['3', '/work/repo/a/.env'],
  ]);
  expect(occurrences(readOnly, '--bind-fd', 2)).toEqual([]);
});

it('binds a read-only cwd read-only, once, even when it is also a read path', () => {
  const args = bwrapArgv(
    'bwrap',
    layout,
    {
      ...plan,
      cwdWritable: false,
      readOnlyPaths: ['/work/repo'],
      protectedPaths: [],
    },
    {},
  );
  expect(occurrences(args, '--bind', 2)).toEqual([]);
  expect(occurrences(args, '--ro-bind', 2).filter(([p]) => p === '/work/repo')).toHaveLength(1);
});

it('lets a writable cwd win over the same path given as a read path', () => {
  const args = bwrapArgv('bwrap', layout, { ...plan, readOnlyPaths: ['/work/repo'] }, {});
  const cwdBinds = args.flatMap((a, i) =>
    (a === '--bind' || a === '--ro-bind') && args[i + 1] === '/work/repo' ? [a] : [],
  );
  expect(cwdBinds.at(-1)).toBe('--bind');
});

it('binds further write scopes writable, over a read-only parent, and a read-only cwd stays so', () => {
  const args = bwrapArgv(
    'bwrap',
    layout,
    {
      ...plan,
      cwdWritable: false,
      readOnlyPaths: ['/data'],
      writablePaths: ['/data/out', '/work/repo/src'],
      protectedPaths: [],
    },
    {},
  );
  expect(occurrences(args, '--bind', 2)).toEqual([
    ['/data/out', '/data/out'],
    ['/work/repo/src', '/work/repo/src'],
  ]);
  expect(occurrences(args, '--ro-bind', 2)).toEqual(
    expect.arrayContaining([
      ['/data', '/data'],
      ['/work/repo', '/work/repo'],
    ]),
  );
  const at = (p: string, flag: string) => args.findIndex((a, i) => a === flag && args[i + 1] === p);
  expect(at('/data/out', '--bind')).toBeGreaterThan(at('/data', '--ro-bind'));
  expect(at('/work/repo/src', '--bind')).toBeGreaterThan(at('/work/repo', '--ro-bind'));
});

it('keeps the network namespace of a run with egress, binding its socket and the bridge’s node', () => {
  const bound = (node: string) => {
    const args = bwrapArgv('bwrap', layout, { ...plan, egress: { socket: '/s/e.sock', node } }, {});
    expect(args).not.toContain('--share-net');
    return occurrences(args, '--ro-bind', 2);
  };
  // Under a bound system directory, node needs no bind of its own; elsewhere it gets one.
  expect(bound('/usr/bin/node')).toEqual(
    expect.arrayContaining([['/s/e.sock', '/run/toolgate/egress.sock']]),
  );
  expect(bound('/usr/bin/node')).not.toContainEqual(['/usr/bin/node', '/usr/bin/node']);
  expect(bound('/opt/node/bin/node')).toContainEqual(['/opt/node/bin/node', '/opt/node/bin/node']);
  expect(bound('/usrx/node')).toContainEqual(['/usrx/node', '/usrx/node']);
});
