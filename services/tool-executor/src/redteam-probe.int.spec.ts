import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@toolgate/sandbox';
import { DEFAULT_PROTECTION } from '@toolgate/permissions';

let sandbox: Sandbox;
let work: string;
beforeAll(async () => { sandbox = await Sandbox.open(); });
beforeEach(async () => {
  work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-rt-')));
  await fs.mkdir(path.join(work, '.git', 'hooks'), { recursive: true });
  await fs.writeFile(path.join(work, '.git', 'config'), 'ORIG\n');
  await fs.mkdir(path.join(work, '.vscode'));
  await fs.writeFile(path.join(work, '.vscode', 'settings.json'), 'ORIG\n');
});
afterEach(() => fs.rm(work, { recursive: true, force: true }));

const sh = (script: string) => sandbox.run({
  argv: ['/bin/sh', '-c', script], cwd: work, env: { PATH: '/usr/bin:/bin', HOME: '/root' },
  timeoutMs: 20_000, maxOutputBytes: 1 << 20,
  protectedPaths: ['.git', '.vscode', '.vscode/settings.json'],
});

it('probe', async () => {
  const r = await sh(`
echo "== id"; id; cat /proc/self/status | grep -E 'Cap|NoNewPriv|Seccomp'
echo "== self fds"; ls -la /proc/self/fd
echo "== pid1 fds"; ls -la /proc/1/fd 2>&1; cat /proc/1/cmdline | tr '\\0' ' '; echo
echo "== ps"; ls /proc | grep -E '^[0-9]+$' | while read p; do echo "$p $(tr '\\0' ' ' < /proc/$p/cmdline)"; done
echo "== mounts"; cat /proc/self/mountinfo
echo "== env"; env
echo "== / "; ls -la /
echo "== uid_map"; cat /proc/self/uid_map
echo "== writable test"; for d in /tmp /dev/shm /usr /etc /proc/sys /sys $PWD/.git $PWD/.vscode; do touch $d/x 2>/dev/null && echo "W $d" || echo "ro $d"; done
echo "== write via pid1 fd";  for n in 3 4 5 6; do echo EVIL > /proc/1/fd/$n/config 2>&1 && echo "wrote via $n"; done
echo done
`);
  console.log(r.stdout.text(), r.stderr.text());
  console.log('host git config:', await fs.readFile(path.join(work, '.git', 'config'), 'utf8'));
});
