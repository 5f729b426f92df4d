import { ociConfig, type RuncPlan } from './oci-config';

const plan = (extra: Partial<RuncPlan> = {}): RuncPlan => ({
  rootfs: '/images/busybox/rootfs',
  argv: ['/bin/sh', '-c', 'cat'],
  env: { PATH: '/bin', TOOLGATE_TOOL: 'probe' },
  workDir: '/srv/work',
  workWritable: true,
  protectedPaths: ['/srv/work/sub/.git', '/srv/work/.git'],
  inputDir: '/run/b/input',
  network: false,
  memoryBytes: 64 * 1024 * 1024,
  processes: 16,
  cpus: 0.5,
  cpuSeconds: 30,
  tmpBytes: 1024 * 1024,
  openFiles: 128,
  user: { uid: 0, gid: 0 },
  ...extra,
});

describe('ociConfig', () => {
  it('isolates every namespace, the network one unless the call may use the network', () => {
    const types = (p: RuncPlan) => ociConfig(p).linux.namespaces.map((n) => n.type);
    expect(types(plan())).toEqual(['pid', 'ipc', 'uts', 'mount', 'network']);
    expect(types(plan({ network: true }))).toEqual(['pid', 'ipc', 'uts', 'mount']);
  });

  it('gives egress its own network namespace and the hook that opens the proxy port in it', () => {
    const hook = { path: '/usr/bin/node', args: ['/usr/bin/node', '-e', '…'], timeout: 10 };
    const config = ociConfig(plan({ egressHook: hook }));
    expect(config.linux.namespaces.map((n) => n.type)).toContain('network');
    expect(config.hooks).toEqual({ createRuntime: [hook] });
    expect(ociConfig(plan()).hooks).toBeUndefined();
  });

  it('binds the call directory writable at /work and its protected paths read-only over it', () => {
    const config = ociConfig(plan());
    const binds = config.mounts.filter((m) => m.type === 'bind');
    expect(binds.map((m) => [m.source, m.destination, m.options[1]])).toEqual([
      ['/run/b/input', '/toolgate', 'ro'],
      ['/srv/work', '/work', 'rw'],
      ['/srv/work/.git', '/work/.git', 'ro'],
      ['/srv/work/sub/.git', '/work/sub/.git', 'ro'],
    ]);
    expect(config.root).toEqual({ path: '/images/busybox/rootfs', readonly: true });
    expect(
      ociConfig(plan({ workWritable: false })).mounts.find((m) => m.destination === '/work'),
    ).toMatchObject({ options: ['bind', 'ro', 'nosuid', 'nodev'] });
    expect(() => ociConfig(plan({ protectedPaths: ['/srv/other/.git'] }))).toThrow(/not inside/);
    expect(() => ociConfig(plan({ ancestorPaths: ['/srv/other'] }))).toThrow(/not inside/);
    expect(() => ociConfig(plan({ protectedPaths: ['/srv/work'] }))).toThrow(/not inside/);
  });

  it('binds the folders on the way to a protected path onto themselves, before it, from the checked sources', () => {
    const mounts = (p: RuncPlan) =>
      ociConfig(p)
        .mounts.filter((m) => m.type === 'bind' && m.destination.startsWith('/work/'))
        .map((m) => [m.source, m.destination, m.options[1]]);
    const nested = plan({
      protectedPaths: ['/srv/work/.vscode/settings.json'],
      ancestorPaths: ['/srv/work/.vscode'],
      mountSources: {
        '/srv/work/.vscode': '/proc/7/fd/31',
        '/srv/work/.vscode/settings.json': '/proc/7/fd/30',
      },
    });
    expect(mounts(nested)).toEqual([
      ['/proc/7/fd/31', '/work/.vscode', 'rw'],
      ['/proc/7/fd/30', '/work/.vscode/settings.json', 'ro'],
    ]);
    expect(mounts({ ...nested, workWritable: false })[0]).toEqual([
      '/proc/7/fd/31',
      '/work/.vscode',
      'ro',
    ]);
  });

  it('limits memory (no swap on top), processes, CPU and files; no capabilities, no new privileges', () => {
    const config = ociConfig(plan());
    expect(config.linux.resources).toMatchObject({
      memory: { limit: 64 * 1024 * 1024, swap: 64 * 1024 * 1024 },
      pids: { limit: 16 },
      cpu: { quota: 50_000, period: 100_000 },
    });
    expect(config.process.rlimits).toEqual([
      { type: 'RLIMIT_NOFILE', hard: 128, soft: 128 },
      { type: 'RLIMIT_CPU', hard: 31, soft: 30 },
    ]);
    expect(Object.values(config.process.capabilities).flat()).toEqual([]);
    expect(config.process.noNewPrivileges).toBe(true);
    expect(config.process.env).toEqual(['PATH=/bin', 'TOOLGATE_TOOL=probe']);
    expect(config.linux.seccomp.syscalls[0]!.names).toEqual(
      expect.arrayContaining(['unshare', 'setns', 'mount', 'ptrace', 'keyctl', 'bpf']),
    );
  });
});
