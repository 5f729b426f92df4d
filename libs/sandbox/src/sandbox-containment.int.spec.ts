/**
 * Containment, proved by attacks with real bubblewrap and real processes: each test does what a
 * hostile tool would, and most first show that the same probe succeeds where it is not contained
 * (so the assertion can fail).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { eventually } from '@toolgate/testing';
import {
  descendants,
  launcherArgv,
  LAUNCHER_ENV,
  PidsCgroup,
  runProcess,
  Sandbox,
  type ProcessRequest,
  type ProcessResult,
} from './index';
import { sandboxSpec } from '../test/sandbox-spec';

const PATH = '/usr/bin:/bin';
const spec = sandboxSpec({ prefix: 'tg-sandbox-' });
const { sh } = spec;
let outside: string;

beforeEach(async () => {
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-outside-')));
});

afterEach(async () => {
  await fs.rm(outside, { recursive: true, force: true });
});

const bare = (script: string, extra: Partial<ProcessRequest> = {}): Promise<ProcessResult> =>
  runProcess({
    argv: ['/bin/sh', '-c', script],
    cwd: spec.work,
    env: { PATH },
    timeoutMs: 20_000,
    maxOutputBytes: 1024 * 1024,
    ...extra,
  });

/** A `sleep` argument no other process has in its command line: the run's processes carry it. */
const sleepMarker = () =>
  `${3000 + Math.floor(Math.random() * 1000)}.${randomBytes(3).readUIntBE(0, 3)}`;

/** Cancels `running` once `min` processes carrying `marker` run; none may be left after. */
async function expectCancelKillsAll(
  marker: string,
  min: number,
  controller: AbortController,
  running: Promise<ProcessResult>,
): Promise<void> {
  await eventually(() => (hostProcessesWith(marker).length >= min ? true : undefined), {
    what: 'the tree running',
  });
  controller.abort();
  expect((await running).ending).toBe('cancelled');
  expect(hostProcessesWith(marker)).toEqual([]);
}

/** Host processes whose command line contains `marker`. */
function hostProcessesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // A zombie runs nothing and holds nothing: it is gone for this purpose.
      if (cmdline.includes(marker) && !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) {
        pids.push(Number(entry));
      }
    } catch {
      // Exited while we looked.
    }
  }
  return pids;
}

it('runs argv in its directory with JSON on stdin and its output captured', async () => {
  const result = await spec.sandbox.run({
    argv: ['/bin/sh', '-c', 'pwd; cat'],
    cwd: spec.work,
    env: { PATH },
    stdin: '{"name":"toolgate"}',
    timeoutMs: 10_000,
    maxOutputBytes: 4096,
  });
  expect(result).toMatchObject({ ending: 'exited', exitCode: 0 });
  expect(result.stdout.text()).toBe(`${spec.work}\n{"name":"toolgate"}`);
});

it('cannot read a secret in the service home or anywhere outside its scope', async () => {
  const home = await fs.mkdtemp(path.join(outside, 'home-'));
  await fs.mkdir(path.join(home, '.ssh'));
  const secret = `-----BEGIN KEY ${randomBytes(12).toString('hex')}-----`;
  await fs.writeFile(path.join(home, '.ssh', 'id_ed25519'), secret);
  const probe = `cat ${home}/.ssh/id_ed25519; ls ${home}; cat /etc/shadow; ls /root /home; echo "HOME=$HOME"`;

  expect((await bare(probe)).stdout.text()).toContain(secret);

  const contained = await sh(probe, { env: { PATH, HOME: home } });
  const out = contained.stdout.text();
  expect(out).not.toContain(secret);
  expect(out).not.toContain('root:');
  expect(out).toContain('HOME=/tmp');
  expect(contained.stderr.text()).toContain('No such file or directory');
});

it('sees the system read-only: TLS roots yes, the host TLS keys and /etc at large no', async () => {
  const probe =
    'for p in /etc/ssl/certs /etc/passwd /etc/ssl/private /etc/shadow /etc/ssh /root /var /home; do ' +
    'if [ -e "$p" ]; then echo "$p"; fi; done; touch /usr/x /etc/passwd 2>/dev/null || echo read-only';
  expect((await bare(probe)).stdout.text()).toContain('/etc/ssl/certs\n/etc/passwd\n');
  expect((await sh(probe)).stdout.text()).toBe('/etc/ssl/certs\n/etc/passwd\nread-only\n');
});

it("cannot read the service's environment: not through /proc, not from its parent", async () => {
  const name = `TG_SERVICE_SECRET_${randomBytes(4).toString('hex').toUpperCase()}`;
  const secret = `s3cr3t-${randomBytes(12).toString('hex')}`;
  process.env[name] = secret;
  try {
    // The variables this process started with: the parent's environment a tool would read today.
    const ours = readFileSync('/proc/self/environ', 'utf8')
      .split('\0')
      // PATH, and what every shell sets itself (the launcher's bash has its own SHLVL and PWD).
      .filter((kv) => kv.includes('=') && !/^(PATH|SHLVL|PWD)=/.test(kv));
    const probe =
      'cat /proc/$PPID/environ; echo; cat /proc/1/environ; echo; ' +
      'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done; env';
    expect((await bare('cat /proc/$PPID/environ')).stdout.text().split('\0')).toEqual(
      expect.arrayContaining(ours),
    );

    const result = await sh(probe);
    const out = result.stdout.text();
    expect(out).toContain(`PATH=${PATH}`);
    expect(out).not.toContain(secret);
    for (const kv of ours) expect(out).not.toContain(kv);
    // The service's own process is not in the sandbox's process table at all.
    expect(out).not.toContain(process.argv[1] ?? 'jest');
  } finally {
    delete process.env[name];
  }
});

it('runs none of its environment on the host: BASH_ENV and LD_PRELOAD act in the sandbox only', async () => {
  const marker = path.join(outside, 'ran-on-host');
  await fs.writeFile(path.join(spec.work, 'hook.sh'), `echo pwned > ${marker}\n`);
  const env = {
    PATH,
    BASH_ENV: path.join(spec.work, 'hook.sh'),
    LD_PRELOAD: path.join(spec.work, 'x.so'),
  };
  // A bash on the host started with these variables runs the tool's file.
  await runProcess({
    argv: ['/bin/bash', '-c', 'true'],
    cwd: spec.work,
    env,
    timeoutMs: 10_000,
    maxOutputBytes: 4096,
  });
  expect(await fs.readFile(marker, 'utf8')).toBe('pwned\n');
  await fs.rm(marker);

  const result = await sh('echo "$BASH_ENV"', { env });
  expect(result.stdout.text()).toBe(`${env.BASH_ENV}\n`);
  await expect(fs.access(marker)).rejects.toThrow();
});

it('cannot write outside its directory; /tmp is private; writes inside land', async () => {
  const probe =
    `echo x > ${outside}/planted; echo x > /usr/planted; echo x > /etc/planted; ` +
    `echo x > /tmp/private && echo tmp-ok; echo inside > ${spec.work}/result.txt && echo cwd-ok`;
  const result = await sh(probe);
  expect(result.stdout.text()).toBe('tmp-ok\ncwd-ok\n');
  expect(result.stderr.text()).toMatch(/Read-only file system|No such file or directory/);
  await expect(fs.access(path.join(outside, 'planted'))).rejects.toThrow();
  await expect(fs.access('/usr/planted')).rejects.toThrow();
  await expect(fs.access('/tmp/private')).rejects.toThrow();
  expect(await fs.readFile(path.join(spec.work, 'result.txt'), 'utf8')).toBe('inside\n');
});

it('writes nothing at all under read-only isolation', async () => {
  const result = await sh(`echo x > ${spec.work}/file || echo refused`, { writable: false });
  expect(result.stdout.text()).toBe('refused\n');
  await expect(fs.access(path.join(spec.work, 'file'))).rejects.toThrow();
});

it('cannot write into, replace or remove .git', async () => {
  execFileSync('git', ['init', '-q', spec.work]);
  const config = await fs.readFile(path.join(spec.work, '.git', 'config'), 'utf8');
  const probe =
    'echo "[core] fsmonitor = evil" >> .git/config; touch .git/hooks/pre-commit; ' +
    'rm -rf .git; mv .git moved; echo src > src.txt && echo worktree-ok';
  const result = await sh(probe);
  expect(result.stdout.text()).toBe('worktree-ok\n');
  expect(await fs.readFile(path.join(spec.work, '.git', 'config'), 'utf8')).toBe(config);
  await expect(fs.access(path.join(spec.work, '.git', 'hooks', 'pre-commit'))).rejects.toThrow();
  await expect(fs.access(path.join(spec.work, 'moved'))).rejects.toThrow();
  expect(await fs.readFile(path.join(spec.work, 'src.txt'), 'utf8')).toBe('src\n');
});

it('runs where .git is a symlink, keeping what it reaches in the directory read-only', async () => {
  await fs.mkdir(path.join(spec.work, 'real-git'));
  await fs.writeFile(path.join(spec.work, 'real-git', 'config'), 'kept\n');
  await fs.symlink('real-git', path.join(spec.work, '.git'));
  const result = await sh(
    'echo evil >> .git/config; echo evil >> real-git/config; mv real-git moved; echo ran',
  );
  expect(result.stdout.text()).toBe('ran\n');
  expect(await fs.readFile(path.join(spec.work, 'real-git', 'config'), 'utf8')).toBe('kept\n');
  await expect(fs.access(path.join(spec.work, 'moved'))).rejects.toThrow();
});

it('binds a protected path only as checked: a symlink on its way binds nothing from the host', async () => {
  // What a concurrent call could swap in after the walk saw a real directory: app -> the host's
  // secrets. The protected path is named as the walk found it, app/.ssh.
  await fs.mkdir(path.join(outside, '.ssh'));
  await fs.writeFile(path.join(outside, '.ssh', 'id_rsa'), 'HOST KEY');
  await fs.symlink(outside, path.join(spec.work, 'app'));
  const result = await sh('cat app/.ssh/id_rsa; echo ran', {
    protectedPaths: [path.join(spec.work, 'app', '.ssh')],
  });
  expect(result.stdout.text()).toBe('ran\n');
  expect(result.stderr.text()).toMatch(/No such file/);
});

it('leaves no set-user-ID or set-group-ID file behind, however it sets the mode', async () => {
  const setId = async (name: string) =>
    ((await fs.stat(path.join(spec.work, name)).catch(() => undefined))?.mode ?? 0) & 0o6000;
  // On the host the same commands make a set-user-ID program (so the assertion can fail).
  await bare('cp /bin/sh ./host-suid && chmod 4755 ./host-suid');
  expect(await setId('host-suid')).toBe(0o4000);
  const result = await sh(
    'cp /bin/sh ./sush && chmod 4755 ./sush; chmod u+s,g+s ./sush; ' +
      'install -m 6755 /bin/sh ./sush2; cp /bin/sh ./sush3 && chmod 2755 ./sush3; ' +
      `perl -MFcntl -e 'sysopen(my $f, "sush4", O_CREAT|O_WRONLY, 06755) or print "refused\n"'; ` +
      'mkdir -m 2775 shared; echo ran',
  );
  expect(result.stdout.text()).toContain('ran');
  expect(result.stdout.text()).toContain('refused');
  for (const name of ['sush', 'sush2', 'sush3', 'sush4', 'shared'])
    expect({ name, setId: await setId(name) }).toEqual({ name, setId: 0 });
  // Plain modes still work.
  expect(
    (await sh('cp /bin/sh ./plain && chmod 755 ./plain && ./plain -c "echo ok"')).stdout.text(),
  ).toBe('ok\n');
});

describe('a scope another call swapped for a symlink to the host', () => {
  const keys = 'PRIVATE SIGNING KEYS';
  beforeEach(async () => {
    await fs.writeFile(path.join(outside, 'keys.json'), keys);
    await fs.writeFile(path.join(outside, 'victim.txt'), 'host');
  });

  it('is not bound as a read scope: the host file behind the link is never read', async () => {
    const docs = path.join(spec.work, 'docs');
    await fs.mkdir(docs);
    await fs.writeFile(path.join(docs, 'readme'), 'docs');
    // The real scope binds (and so would what it is swapped for, were a link followed).
    expect((await sh(`cat ${docs}/readme`, { readOnlyPaths: [docs] })).stdout.text()).toBe('docs');
    await fs.rename(docs, `${docs}.bak`);
    await fs.symlink(outside, docs);
    const run = await sh(`cat ${docs}/keys.json; echo ran`, { readOnlyPaths: [docs] });
    expect(run.stdout.text()).toBe('ran\n');
    expect(run.stderr.text()).toMatch(/No such file/);
  });

  it('is not bound as a write scope, and refuses the run as its directory: the host file stays unchanged', async () => {
    const out = path.join(spec.work, 'out');
    await fs.symlink(outside, out);
    const run = await sh(`echo PWNED > ${out}/victim.txt; echo ran`, {
      writable: false,
      writablePaths: [out],
    });
    expect(run.stdout.text()).toBe('ran\n');
    // A worktree swapped for a link, say.
    const refused = await sh(`echo PWNED > victim.txt`, { cwd: out }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'denied', details: { scope: 'out' } });
    expect(await fs.readFile(path.join(outside, 'victim.txt'), 'utf8')).toBe('host');
  });

  it("is not bound as one of the operator's read paths (opened with the sandbox)", async () => {
    const tools = path.join(spec.work, 'tools');
    await fs.mkdir(tools);
    const own = await Sandbox.open({ readOnlyPaths: [tools] });
    await fs.rename(tools, `${tools}.bak`);
    await fs.symlink(outside, tools);
    const cwd = path.join(spec.work, 'run');
    await fs.mkdir(cwd);
    const run = await own.run({
      argv: ['/bin/sh', '-c', `cat ${tools}/keys.json; echo ran`],
      cwd,
      env: { PATH },
      timeoutMs: 20_000,
      maxOutputBytes: 4096,
    });
    expect(run.stdout.text()).toBe('ran\n');
  });
});

it('passes the protected paths to bubblewrap as descriptors the command never holds', async () => {
  execFileSync('git', ['init', '-q', spec.work]);
  await fs.writeFile(path.join(spec.work, '.env'), 'A=1\n');
  const result = await sh('ls /proc/self/fd; echo x >> .env || echo refused', {
    protectedPaths: ['.git', '.env'],
  });
  expect(result.stdout.text()).toBe('0\n1\n2\n3\nrefused\n');
  expect(await fs.readFile(path.join(spec.work, '.env'), 'utf8')).toBe('A=1\n');
});

it('cannot reach a TCP listener on the host loopback without network', async () => {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.end('hello\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const probe =
    `node -e "require('net').connect(${port},'127.0.0.1')` +
    `.on('data',d=>{process.stdout.write('reached '+d);process.exit(0)})` +
    `.on('error',e=>{console.log(e.code);process.exit(3)})"`;
  try {
    const open = await sh(probe, { network: true });
    expect(open.stdout.text()).toBe('reached hello\n');
    expect(connections).toBe(1);

    const closed = await sh(probe);
    expect(closed.exitCode).toBe(3);
    expect(closed.stdout.text()).toBe('ECONNREFUSED\n');
    expect(connections).toBe(1);
  } finally {
    server.close();
  }
});

it('cannot start more processes than its limit', async () => {
  // Each started sleep prints a line; the shell stops at the first fork that fails.
  const probe = 'i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); echo $i; done';
  const roomy = await sh(probe, { limits: { processes: 64 }, timeoutMs: 10_000 });
  expect(roomy.stdout.text().trim().split('\n')).toHaveLength(40);

  const bounded = await sh(probe, { limits: { processes: 8 } });
  const started = bounded.stdout.text().trim().split('\n').filter(Boolean);
  expect(started.length).toBeLessThan(8);
  expect(bounded.stderr.text()).toMatch(/fork/i);
});

it('contains a fork bomb: it ends at its deadline and leaves no process', async () => {
  const marker = `bomb${randomBytes(6).toString('hex')}`;
  const result = await spec.sandbox.run({
    // `exec`: the shell becomes the sleep without a fork, which the bomb may have left no room
    // for (a fork of `sleep` that failed ended the shell early, `exited`, in one CI run).
    argv: ['/bin/sh', '-c', `${marker}() { ${marker} | ${marker} & }; ${marker}; exec sleep 30`],
    cwd: spec.work,
    env: { PATH },
    limits: { processes: 16 },
    timeoutMs: 2000,
    maxOutputBytes: 4096,
  });
  expect(result.ending).toBe('timeout');
  expect(hostProcessesWith(marker)).toEqual([]);
});

it('kills the whole tree at the deadline: a child ignoring SIGTERM and a sleeping grandchild', async () => {
  const marker = sleepMarker();
  const script =
    `trap '' TERM; sh -c 'trap "" TERM; sleep ${marker} & sleep ${marker}; wait' & ` +
    `sleep ${marker}; wait`;
  const running = sh(script, { timeoutMs: 5000 });
  // Three sleeps with the marker run (the shell, its child and its grandchild each start one).
  await eventually(() => (hostProcessesWith(marker).length >= 3 ? true : undefined), {
    timeoutMs: 4000,
    what: 'the tree running',
  });
  const result = await running;
  expect(result.ending).toBe('timeout');
  expect(hostProcessesWith(marker)).toEqual([]);
});

it('kills the whole tree when the call is cancelled', async () => {
  const marker = sleepMarker();
  const controller = new AbortController();
  const running = sh(`(trap '' TERM; sleep ${marker}) & sleep ${marker}; wait`, {
    signal: controller.signal,
  });
  await expectCancelKillsAll(marker, 2, controller, running);
});

it('applies the resource limits and passes no descriptor but stdio', async () => {
  const result = await sh('ulimit -n; ulimit -t; ulimit -v; ls /proc/self/fd', {
    limits: { openFiles: 32, cpuSeconds: 7, addressSpaceBytes: 512 * 1024 * 1024 },
  });
  const [files, cpu, vmem, ...fds] = result.stdout.text().trim().split('\n');
  // Memory is the run's memory cgroup's (sandbox-limits.int.spec.ts), not a per-process RLIMIT_AS.
  expect([files, cpu, vmem]).toEqual(['32', '7', 'unlimited']);
  // 0-2 and the directory ls itself opened to list them.
  expect(fds).toEqual(['0', '1', '2', '3']);
});

it('caps stdout and stderr, draining the rest', async () => {
  const result = await sh(
    "head -c 100000 /dev/zero | tr '\\000' a; head -c 10 /dev/zero | tr '\\000' b >&2",
    { maxOutputBytes: 1000 },
  );
  expect(result.stdout.text()).toBe('a'.repeat(1000));
  expect(result.stdout.truncated).toBe(true);
  expect(result.stderr.text()).toBe('b'.repeat(10));
  expect(result.exitCode).toBe(0);
});

// The process runner on its own (the sandbox's outer layer): a descendant that leaves the run's
// process group is out of reach of a group kill, and holds the run's pipes open while it lives.
// Before the runner killed the tree below it too, these runs waited out the test's timeout.
describe('a descendant in a session of its own', () => {
  const detachedTree = (marker: string) => `setsid sleep ${marker} & sleep ${marker}; wait`;

  it('is killed at the deadline with the rest, and the run ends', async () => {
    const marker = sleepMarker();
    const result = await bare(detachedTree(marker), { timeoutMs: 1000 });
    expect(result.ending).toBe('timeout');
    expect(hostProcessesWith(marker)).toEqual([]);
  });

  it('is killed when the call is cancelled, and the run ends', async () => {
    const marker = sleepMarker();
    const controller = new AbortController();
    const running = bare(detachedTree(marker), { timeoutMs: 60_000, signal: controller.signal });
    await expectCancelKillsAll(marker, 2, controller, running);
  });
});

it("kills through the run's pids cgroup a process that left its tree and its session", async () => {
  const pids = (await PidsCgroup.open(undefined))!;
  const cgroup = await pids.create(16);
  const marker = sleepMarker();
  const controller = new AbortController();
  try {
    // The subshell exits at once: its `setsid sleep` belongs to init, in a session of its own —
    // out of reach of the tree walk and of the group kill; only the cgroup still holds it.
    const running = runProcess({
      argv: launcherArgv('/bin/bash', cgroup, [
        '/bin/sh',
        '-c',
        `(setsid sleep ${marker} &); sleep ${marker}`,
      ]),
      cwd: spec.work,
      env: LAUNCHER_ENV,
      timeoutMs: 60_000,
      maxOutputBytes: 1024,
      signal: controller.signal,
      killAlso: () => pids.killAll(cgroup),
    });
    // Both sleeps running, one of them out of this process's tree (fails if that never holds): read
    // until the subshell that started it has gone (a moment after its fork, the orphan is handed
    // to init).
    await eventually(
      () => {
        const all = hostProcessesWith(marker);
        const ours = new Set(descendants(process.pid));
        const out = all.filter((pid) => !ours.has(pid));
        return all.length >= 2 && out.length === 1 ? out : undefined;
      },
      { what: 'both sleeps running, one of them outside our tree' },
    );
    await expectCancelKillsAll(marker, 2, controller, running);
  } finally {
    await pids.remove(cgroup);
  }
});
