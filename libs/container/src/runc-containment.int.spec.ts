/**
 * Containment of the runc backend, proved by attacks with real runc, a real busybox image and
 * real processes: each test does what a hostile tool would, and where it helps first shows the
 * same probe succeeding where it is not contained, so the assertion can fail.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import { makeBusyboxImage } from '@toolgate/testing';
import { RuncBackend, type ContainerRequest, type ContainerResult } from './index';

const MIB = 1024 * 1024;
let images: string;
let stateDir: string;
let backend: RuncBackend;
let work: string;
let outside: string;

beforeAll(async () => {
  images = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-images-'));
  stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-runc-'));
  await makeBusyboxImage(images);
  backend = await RuncBackend.open({
    images,
    stateDir,
    limits: { memoryBytes: 64 * MIB, processes: 16 },
  });
});

afterAll(async () => {
  await backend.idle();
  await fs.rm(images, { recursive: true, force: true });
  await fs.rm(stateDir, { recursive: true, force: true });
});

beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-work-')));
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-outside-')));
});

afterEach(async () => {
  await fs.rm(work, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

const sh = (script: string, extra: Partial<ContainerRequest> = {}): Promise<ContainerResult> =>
  backend.run({
    image: 'busybox',
    argv: ['/bin/sh', '-c', script],
    env: {},
    cwd: work,
    writable: true,
    protectedPaths: [],
    network: false,
    input: '{"name":"Ada"}',
    timeoutMs: 20_000,
    maxOutputBytes: MIB,
    labels: { tool: 'probe', dispatchId: 'd-1' },
    ...extra,
  });

/** runc containers left in the backend's state directory, once its clean-ups are done. */
const containers = async () => {
  await backend.idle();
  return listContainers();
};
const listContainers = () =>
  execFileSync('runc', ['--root', path.join(stateDir, 'runc'), 'list', '--quiet'], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);

/** Host processes whose command line contains `marker`. */
function hostProcessesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) pids.push(+entry);
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

it('runs the command in the image: input on stdin and in /toolgate/input.json, /work as its directory', async () => {
  const result = await sh(
    'cat; echo; cat "$TOOLGATE_INPUT_FILE"; echo; pwd; echo "$HOME $GREETING"',
    {
      env: { GREETING: 'hello' },
    },
  );
  expect(result).toMatchObject({ ending: 'exited', exitCode: 0, memoryExceeded: false });
  expect(result.stdout.text()).toBe('{"name":"Ada"}\n{"name":"Ada"}\n/work\n/tmp hello\n');
  expect(await containers()).toEqual([]);
  expect(await fs.readdir(path.join(stateDir, 'bundles'))).toEqual([]);
});

it('cannot read a secret planted on the host outside its directory, nor the service environment', async () => {
  const secret = `s3cret-${randomBytes(6).toString('hex')}`;
  await fs.writeFile(path.join(outside, 'secret.txt'), secret);
  const home = path.join(os.homedir(), `.tg-secret-${randomBytes(4).toString('hex')}`);
  await fs.writeFile(home, secret);
  try {
    // The host can read both: the probe below would find them if they were there.
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(secret);
    const result = await sh(
      `cat ${outside}/secret.txt ${home} /proc/${process.pid}/environ 2>&1; ` +
        `grep -rs ${secret} /etc /work /tmp /toolgate 2>/dev/null; echo done`,
    );
    expect(result.stdout.text()).not.toContain(secret);
    expect(result.stdout.text()).toContain('No such file or directory');
    expect(result.stdout.text()).toContain('done');
  } finally {
    await fs.rm(home, { force: true });
  }
});

it('writes only in its directory: not into the image, not into .git or another protected path', async () => {
  await fs.mkdir(path.join(work, '.git'));
  await fs.writeFile(path.join(work, '.git', 'config'), '[core]\n');
  await fs.writeFile(path.join(work, '.env'), 'TOKEN=x\n');
  const rootfsBefore = execFileSync('ls', ['-laR', path.join(images, 'busybox', 'rootfs')], {
    encoding: 'utf8',
  });
  const result = await sh(
    'echo ok > out.txt; echo x > /etc/hacked; echo x > /bin/hacked; ' +
      'printf "[core]\\n\\tfsmonitor = evil\\n" >> .git/config; echo x > .git/hooks-pwn; ' +
      'echo TOKEN=stolen > .env; echo tmp > /tmp/t && cat /tmp/t; ' +
      `echo x > ${outside}/escaped; true`,
    { protectedPaths: [path.join(work, '.git'), path.join(work, '.env')] },
  );
  expect(result.exitCode).toBe(0);
  expect(result.stdout.text()).toBe('tmp\n');
  expect(result.stderr.text()).toMatch(/\/etc\/hacked: Read-only file system/);
  expect(result.stderr.text()).toMatch(/\.git\/config: Read-only file system/);
  expect(result.stderr.text()).toMatch(/\.env: Read-only file system/);
  expect(await fs.readFile(path.join(work, 'out.txt'), 'utf8')).toBe('ok\n');
  expect(await fs.readFile(path.join(work, '.git', 'config'), 'utf8')).toBe('[core]\n');
  expect(await fs.readFile(path.join(work, '.env'), 'utf8')).toBe('TOKEN=x\n');
  expect(existsSync(path.join(work, '.git', 'hooks-pwn'))).toBe(false);
  expect(existsSync(path.join(outside, 'escaped'))).toBe(false);
  expect(
    execFileSync('ls', ['-laR', path.join(images, 'busybox', 'rootfs')], { encoding: 'utf8' }),
  ).toBe(rootfsBefore);
});

it('leaves no set-user-ID or set-group-ID file in its directory (it runs as the host root)', async () => {
  const result = await sh(
    'cp /bin/busybox ./sub && chmod 4755 ./sub; chmod u+s ./sub; cp /bin/busybox ./sgb; ' +
      'chmod 2755 ./sgb; install -m 6755 /bin/busybox ./sub2; cp /bin/busybox plain; ' +
      'chmod 755 plain && echo ran',
  );
  expect(result.stdout.text()).toBe('ran\n');
  for (const name of ['sub', 'sgb', 'sub2']) {
    const mode = (await fs.stat(path.join(work, name)).catch(() => undefined))?.mode ?? 0;
    expect({ name, setId: mode & 0o6000 }).toEqual({ name, setId: 0 });
  }
  expect((await fs.stat(path.join(work, 'plain'))).mode & 0o777).toBe(0o755);
});

it('binds its directory only as checked: swapped for a symlink while it starts, it binds nothing of the host', async () => {
  // Another call that can write the directory's parent exchanges it with a link to the host's
  // secrets again and again (renameat2 RENAME_EXCHANGE: the path is always one or the other).
  const renameat2 = process.arch === 'arm64' ? 276 : 316;
  await fs.writeFile(path.join(outside, 'signing.key'), 'PRIVATE KEY');
  const proj = path.join(work, 'proj');
  await fs.mkdir(proj);
  await fs.symlink(outside, path.join(work, 'link'));
  const swapper = execFile('perl', [
    '-e',
    `my $end = time + 30; while (time < $end) { syscall(${renameat2}, -100, $ARGV[0], -100, $ARGV[1], 2) }`,
    proj,
    path.join(work, 'link'),
  ]);
  try {
    let started = 0;
    for (let i = 0; i < 60; i++) {
      const run = await sh('cat /work/signing.key; echo PWNED > /work/written; echo ran', {
        cwd: proj,
      }).catch((err: unknown) => err as Error);
      if (!(run instanceof Error)) {
        if (run.stdout.text().includes('ran')) started++;
        expect(run.stdout.text()).not.toContain('PRIVATE KEY');
      }
      expect(existsSync(path.join(outside, 'written'))).toBe(false);
    }
    // Some runs got through the race (so the attack had its chance).
    expect(started).toBeGreaterThan(0);
  } finally {
    swapper.kill();
  }
}, 60_000);

it('cannot write at all under read-only isolation', async () => {
  const result = await sh('echo x > out.txt', { writable: false });
  expect(result.exitCode).not.toBe(0);
  expect(result.stderr.text()).toMatch(/Read-only file system/);
  expect(existsSync(path.join(work, 'out.txt'))).toBe(false);
});

it('runs where a protected path is a symlink, binding nothing it reaches outside', async () => {
  await fs.writeFile(path.join(outside, 'config'), 'HOST\n');
  await fs.symlink(outside, path.join(work, '.git'));
  const result = await sh('cat .git/config; echo x > .git/config; echo ran', {
    protectedPaths: [path.join(work, '.git')],
  });
  expect(result.stdout.text()).toBe('ran\n');
  expect(await fs.readFile(path.join(outside, 'config'), 'utf8')).toBe('HOST\n');
});

describe('a protected path below an ordinary folder (issue 23, finding 3)', () => {
  const ORIGINAL = '{"task.allowAutomaticTasks": "off"}\n';
  const attacks = [
    'mv .vscode x; mkdir .vscode; cd .vscode && printf pwned > settings.json',
    'rm -rf .vscode; mkdir .vscode; printf pwned > .vscode/settings.json',
    'mv .github g; mkdir -p .github/workflows; printf pwned > .github/workflows/ci.yml',
    'mkdir -p s/.vscode && printf pwned > s/.vscode/settings.json && tar -C s -cf a.tar .vscode && tar -xf a.tar',
  ];

  beforeEach(async () => {
    await fs.mkdir(path.join(work, '.vscode'));
    await fs.writeFile(path.join(work, '.vscode', 'settings.json'), ORIGINAL);
    await fs.mkdir(path.join(work, '.github', 'workflows'), { recursive: true });
    await fs.writeFile(path.join(work, '.github', 'workflows', 'ci.yml'), ORIGINAL);
  });

  const files = async () =>
    Promise.all(
      ['.vscode/settings.json', '.github/workflows/ci.yml'].map((f) =>
        fs.readFile(path.join(work, f), 'utf8').catch(() => 'gone'),
      ),
    );

  it.each(attacks)('%s: changes the host file where the path is not protected', async (attack) => {
    await sh(attack);
    expect(await files()).not.toEqual([ORIGINAL, ORIGINAL]);
  });

  it.each(attacks)('%s: leaves the host files byte for byte unchanged', async (attack) => {
    const result = await sh(`${attack}; echo ran`, {
      protectedPaths: [
        path.join(work, '.vscode', 'settings.json'),
        path.join(work, '.github', 'workflows'),
      ],
    });
    expect(result.stdout.text()).toContain('ran');
    expect(await files()).toEqual([ORIGINAL, ORIGINAL]);
  });
});

describe('network', () => {
  let server: net.Server;
  let port: number;
  beforeAll(async () => {
    server = net.createServer((socket) => socket.end('pong\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const dial = () => `nc -w 2 127.0.0.1 ${port} </dev/null; echo "exit=$?"`;

  it('reaches a TCP listener on the host only when the network is allowed', async () => {
    const open = await sh(dial(), { network: true });
    expect(open.stdout.text()).toBe('pong\nexit=0\n');
    const closed = await sh(dial());
    expect(closed.stdout.text()).toBe('exit=1\n');
    expect(closed.stderr.text()).toMatch(/Connection refused/);
    // Its own network namespace: loopback only.
    expect((await sh('ls /sys/class/net')).stdout.text()).toBe('lo\n');
  });
});

it('cannot exceed its process limit: a process flood and a fork bomb stop at it', async () => {
  const flood = await sh(
    '(while :; do sleep 30 & done) 2>/dev/null; set -- /proc/[0-9]*; echo $#',
    { limits: { processes: 12 } },
  );
  const count = Number(flood.stdout.text().trim());
  // The container's processes: its shell and the sleeps the flood could start, up to the limit.
  expect(count).toBeLessThanOrEqual(12);
  expect(count).toBeGreaterThanOrEqual(8);
  const bomb = await sh('b(){ b | b & }; b; sleep 1; echo survived', {
    limits: { processes: 12 },
  });
  expect(bomb.stderr.text()).toMatch(/can't fork/);
  expect(await containers()).toEqual([]);
});

it('is killed by the kernel at its memory limit, and says so', async () => {
  const fits = await sh('x=$(head -c 4000000 /dev/zero | tr "\\0" a); echo ${#x}');
  expect(fits).toMatchObject({ exitCode: 0, memoryExceeded: false });
  expect(fits.stdout.text()).toBe('4000000\n');
  const grows = await sh('x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo ${#x}', {
    limits: { memoryBytes: 32 * MIB },
  });
  expect(grows).toMatchObject({ exitCode: 137, memoryExceeded: true });
});

it('is killed at the deadline with everything it started, and deleted', async () => {
  const marker = `${Math.floor(Math.random() * 1e6) + 1000}`;
  const result = await sh(`sleep ${marker} & sleep ${marker}`, {
    timeoutMs: 500,
  });
  expect(result.ending).toBe('timeout');
  expect(hostProcessesWith(`sleep\0${marker}`)).toEqual([]);
  expect(await containers()).toEqual([]);
  expect(await fs.readdir(path.join(stateDir, 'bundles'))).toEqual([]);
});

it('is killed when the call is cancelled', async () => {
  const controller = new AbortController();
  const marker = `${Math.floor(Math.random() * 1e6) + 1000}`;
  const running = sh(`sleep ${marker}`, { signal: controller.signal });
  setTimeout(() => controller.abort(), 300);
  expect((await running).ending).toBe('cancelled');
  expect(hostProcessesWith(`sleep\0${marker}`)).toEqual([]);
  expect(await containers()).toEqual([]);
});

it('cannot create namespaces of its own (user namespaces would give it capabilities again)', async () => {
  const result = await sh('unshare -U -r id 2>&1; echo "exit=$?"');
  expect(result.stdout.text()).toMatch(/Operation not permitted\nexit=1\n$/);
});

it('says why a command could not start, and refuses an image that is not there', async () => {
  const missing = await backend.run({
    ...request(),
    argv: ['/no/such/tool'],
  });
  expect(missing.startError).toMatch(/no such file or directory/);
  await expect(backend.run({ ...request(), image: 'tools/absent:1' })).rejects.toMatchObject({
    code: ErrorCode.Config,
    message: expect.stringContaining('tools/absent:1'),
  });
});

it('removes the containers a crashed executor left behind when it opens', async () => {
  // A container of a process that no longer exists (a pid above pid_max is never alive).
  const orphan = `tg-${4_194_304 + 1}-1-abcdef`;
  const bundle = path.join(stateDir, 'bundles', orphan);
  await fs.mkdir(bundle, { recursive: true });
  execFileSync('runc', ['spec'], { cwd: bundle });
  const spec = JSON.parse(await fs.readFile(path.join(bundle, 'config.json'), 'utf8'));
  spec.root = { path: path.join(images, 'busybox', 'rootfs'), readonly: true };
  spec.process.terminal = false;
  spec.process.args = ['sleep', '1000'];
  await fs.writeFile(path.join(bundle, 'config.json'), JSON.stringify(spec));
  execFileSync(
    'runc',
    ['--root', path.join(stateDir, 'runc'), 'run', '--detach', '--bundle', bundle, orphan],
    {
      stdio: 'ignore',
    },
  );
  expect(listContainers()).toEqual([orphan]);
  await RuncBackend.open({ images, stateDir });
  expect(await containers()).toEqual([]);
  expect(existsSync(bundle)).toBe(false);
});

function request(): ContainerRequest {
  return {
    image: 'busybox',
    argv: ['true'],
    env: {},
    cwd: work,
    writable: true,
    protectedPaths: [],
    network: false,
    input: '{}',
    timeoutMs: 20_000,
    maxOutputBytes: MIB,
    labels: { tool: 'probe', dispatchId: 'd-1' },
  };
}
