import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** Where Debian's `busybox-static` installs its statically linked binary. */
const BUSYBOX = '/usr/bin/busybox';

/**
 * Makes a container image on disk for tests: `<images>/<reference>/rootfs` holding the static
 * busybox and a symlink per applet in /bin (sh, cat, nc, wget, …), plus the few directories a
 * root file system has. No registry is reachable here, and none is needed: the container backend
 * runs images from such directories. Needs Debian's `busybox-static` (a dynamically linked
 * busybox would lack its libraries in the container).
 */
export async function makeBusyboxImage(images: string, reference = 'busybox'): Promise<string> {
  const rootfs = path.join(images, ...reference.split('/'), 'rootfs');
  await fs.mkdir(path.join(rootfs, 'bin'), { recursive: true });
  for (const dir of ['etc', 'proc', 'sys', 'dev', 'tmp', 'work', 'toolgate', 'usr/bin']) {
    await fs.mkdir(path.join(rootfs, dir), { recursive: true });
  }
  await fs.copyFile(BUSYBOX, path.join(rootfs, 'bin', 'busybox'));
  await fs.chmod(path.join(rootfs, 'bin', 'busybox'), 0o755);
  const applets = execFileSync(BUSYBOX, ['--list'], { encoding: 'utf8' })
    .split('\n')
    .filter((a) => /^[a-z0-9_.[-]+$/i.test(a) && a !== 'busybox');
  for (const applet of applets) {
    await fs.symlink('busybox', path.join(rootfs, 'bin', applet)).catch((err) => {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    });
  }
  await fs.writeFile(path.join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/tmp:/bin/sh\n');
  await fs.writeFile(path.join(rootfs, 'etc', 'group'), 'root:x:0:\n');
  return rootfs;
}
