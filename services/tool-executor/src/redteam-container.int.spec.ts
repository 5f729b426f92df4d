import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { RuncBackend } from '@toolgate/container';
import { DEFAULT_PROTECTION } from '@toolgate/permissions';
import { Sandbox } from '@toolgate/sandbox';
import { makeBusyboxImage } from '@toolgate/testing';
import { commandTools } from '../test/command-tools';
import { ContainerExecutor } from './container/container-executor';
import { SubprocessExecutor } from './subprocess/subprocess-executor';

const MIB = 1024 * 1024;
let backend: RuncBackend; let images: string; let state: string; let work: string; let sandbox: Sandbox;
const ct = commandTools('container', { container: { image: 'tools/busybox:1' } });
const sp = commandTools('subprocess');

beforeAll(async () => {
  images = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-images-'));
  state = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-runc-'));
  await makeBusyboxImage(images, 'tools/busybox:1');
  backend = await RuncBackend.open({ images, stateDir: state, limits: { memoryBytes: 64 * MIB, processes: 32 } });
  sandbox = await Sandbox.open();
});
afterAll(async () => { await backend.idle(); await fs.rm(images, { recursive: true, force: true }); await fs.rm(state, { recursive: true, force: true }); });
beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-rtc-')));
  await fs.mkdir(path.join(work, '.git'));
  await fs.writeFile(path.join(work, '.git', 'config'), 'ORIG\n');
  ct.reset(); sp.reset();
});
afterEach(() => fs.rm(work, { recursive: true, force: true }));

const runC = (script: string) => new ContainerExecutor({ ...ct.options, backend, sandbox, protectedPaths: () => DEFAULT_PROTECTION, maxOutputBytes: 256 * 1024 })
  .run(ct.callOf(ct.tool('probe', ['/bin/sh', '-c', script]), { name: 'x' }), { cwd: work, timeoutMs: 20_000 });
const runS = (script: string) => new SubprocessExecutor({ ...sp.options, sandbox, protectedPaths: () => DEFAULT_PROTECTION, baseEnv: { PATH: '/usr/bin:/bin' }, maxOutputBytes: 256 * 1024 })
  .run(sp.callOf(sp.tool('probe', ['/bin/sh', '-c', script]), { name: 'x' }), { cwd: work, timeoutMs: 20_000 });

const hostExec = (file: string) => {
  try { return execFileSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', file, ...(file.endsWith('sush') ? ['-p', '-c', 'id'] : ['id'])], { encoding: 'utf8' }); }
  catch (e) { return 'ERR ' + (e as Error).message; }
};

it('container probe', async () => {
  const r = await runC(`exec 1>&2; id; grep -E 'Cap|NoNewPriv|Seccomp' /proc/self/status; ls -la /proc/self/fd; cat /proc/self/mountinfo; env; ls -la / /work;
   cp /bin/busybox /work/subb && chmod 4755 /work/subb && ls -la /work/subb;
   for d in /proc/sys/kernel /sys/fs/cgroup /proc/sysrq-trigger; do echo x > $d/x 2>&1; done; 
   echo EVIL > /work/.git/config; mv /work/.git /work/g2; ln /work/.git/config /work/hl 2>&1; ls /proc | head -30; cat /proc/1/environ | tr '\\0' ' '; exit 3`);
  console.log('container', JSON.stringify(r, null, 1));
  const st = await fs.stat(path.join(work, 'subb')).catch(() => undefined);
  console.log('container setuid file on host:', st && { mode: st.mode.toString(8), uid: st.uid }, hostExec(path.join(work, 'subb')));
  console.log('git config:', await fs.readFile(path.join(work, '.git', 'config'), 'utf8'));
});

it('subprocess setuid plant', async () => {
  const r = await runS(`cp /bin/bash ./sush && chmod 4755 ./sush && ls -la ./sush 1>&2; exit 3`);
  console.log('subprocess', JSON.stringify(r));
  const st = await fs.stat(path.join(work, 'sush')).catch(() => undefined);
  console.log('bwrap setuid file on host:', st && { mode: st.mode.toString(8), uid: st.uid }, hostExec(path.join(work, 'sush')));
});
