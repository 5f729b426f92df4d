import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ConfigError, IMAGE_REFERENCE_PATTERN } from '@toolgate/contracts';

/** An image on this machine: its root file system and the environment it declares. */
export interface LocalImage {
  rootfs: string;
  /** `process.env` of the image's `config.json` (an unpacked image), as a map. */
  env: Record<string, string>;
}

/**
 * Images as directories under one operator-chosen directory: `<images>/<reference>/rootfs` is the
 * image's root file system, and `<images>/<reference>/config.json`, when present, is the OCI
 * runtime configuration an unpacker wrote beside it (`umoci unpack`, `oci-image-tool`): its
 * environment (PATH and the like) is the container's starting one. A reference is the one the
 * tool registered (`tools/jq:1.7` → `<images>/tools/jq:1.7/`), so the same registration runs
 * here and as a Kubernetes Job. A tool never names a host path: only the operator decides what
 * a container can be made of.
 */
export class ImageStore {
  constructor(private readonly root: string) {}

  /** The image for `reference`; a missing or unusable one is a ConfigError naming it. */
  async resolve(reference: string): Promise<LocalImage> {
    // The reference grammar has no `..`, no leading slash and no empty segment; checked again
    // here because the path is built from it.
    if (!IMAGE_REFERENCE_PATTERN.test(reference) || reference.split('/').includes('..')) {
      throw new ConfigError(`${reference} is not an image reference`, {
        details: { image: reference },
      });
    }
    const dir = path.join(this.root, ...reference.split('/'));
    const rootfs = path.join(dir, 'rootfs');
    const real = await fs.realpath(rootfs).catch(() => undefined);
    const realRoot = await fs.realpath(this.root).catch(() => this.root);
    if (!real || !(await isDirectory(real))) {
      throw new ConfigError(
        `image ${reference} is not on this machine: expected its root file system at ${rootfs}`,
        { details: { image: reference } },
      );
    }
    if (real === '/' || !real.startsWith(`${realRoot}${path.sep}`)) {
      throw new ConfigError(`image ${reference} leaves the image directory`, {
        details: { image: reference },
      });
    }
    return { rootfs: real, env: await imageEnv(path.join(dir, 'config.json'), reference) };
  }
}

async function isDirectory(p: string): Promise<boolean> {
  return (await fs.stat(p).catch(() => undefined))?.isDirectory() ?? false;
}

async function imageEnv(file: string, reference: string): Promise<Record<string, string>> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch {
    return {};
  }
  let env: unknown;
  try {
    env = (JSON.parse(text) as { process?: { env?: unknown } }).process?.env;
  } catch {
    throw new ConfigError(`image ${reference}: config.json is not JSON`, {
      details: { image: reference },
    });
  }
  const out: Record<string, string> = {};
  if (!Array.isArray(env)) return out;
  for (const entry of env) {
    if (typeof entry !== 'string') continue;
    const eq = entry.indexOf('=');
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}
