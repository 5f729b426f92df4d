import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import type { HostEntry, HostLayout } from './bwrap-argv';

/** Top-level system directories reproduced read-only (a merged-/usr symlink stays a symlink). */
const SYSTEM_ROOTS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The parts of `/etc` a sandbox sees, read-only: what the dynamic linker, name lookups, locale and
 * time, TLS roots and Debian's alternatives need. Not the rest: `/etc` also holds host keys,
 * `shadow` and service credentials, and a service running as root could read them.
 */
const ETC_ENTRIES: readonly string[] = Object.freeze([
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'passwd',
  'group',
  'nsswitch.conf',
  'hosts',
  'host.conf',
  'resolv.conf',
  'gai.conf',
  // Certificates and OpenSSL's configuration, not /etc/ssl/private (the host's TLS keys).
  'ssl/certs',
  'ssl/openssl.cnf',
  'ca-certificates',
  'ca-certificates.conf',
  'protocols',
  'services',
  'mime.types',
  'os-release',
  'debian_version',
  'magic',
]);

/** Reads which system paths exist on this host, once, when a sandbox is opened. */
export async function probeHostLayout(): Promise<HostLayout> {
  const entries: HostEntry[] = [];
  for (const root of SYSTEM_ROOTS) {
    const stat = await fs.lstat(root).catch(() => undefined);
    if (!stat) continue;
    if (stat.isSymbolicLink()) {
      entries.push({ kind: 'symlink', path: root, target: await fs.readlink(root) });
    } else if (stat.isDirectory()) {
      entries.push({ kind: 'bind', path: root });
    }
  }
  for (const name of ETC_ENTRIES) {
    const entry = path.join('/etc', name);
    // Followed: a symlinked entry (resolv.conf, localtime) is bound with its target's content.
    if (await fs.stat(entry).catch(() => undefined)) entries.push({ kind: 'bind', path: entry });
  }
  return { entries };
}

/**
 * The absolute path of an executable: `name` itself when it has a slash, else the first match on
 * the service's PATH or the standard system directories. Undefined when there is none.
 */
export async function findExecutable(name: string): Promise<string | undefined> {
  const candidates = name.includes('/')
    ? [name]
    : [
        ...(process.env.PATH ?? '').split(':').filter((d) => d.startsWith('/')),
        '/usr/bin',
        '/bin',
        '/usr/sbin',
        '/sbin',
      ].map((dir) => path.join(dir, name));
  for (const candidate of candidates) {
    const ok = await fs.access(candidate, fsConstants.X_OK).then(
      () => true,
      () => false,
    );
    if (ok) return candidate;
  }
  return undefined;
}
