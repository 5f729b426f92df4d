import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from './errors';
import {
  EVENT_SIGNATURES,
  KeysFileSchema,
  PublicKeysSchema,
  SERVICE_IDENTITIES,
  ServiceKeys,
  generateKeySet,
  type EventSignatures,
  type KeySet,
  type KeysFile,
  type ServiceIdentity,
} from './signing';

/**
 * Where a machine's development keyring lives: the user's state directory (`XDG_STATE_HOME`, or
 * `~/.local/state`), as the default worktree root does.
 */
export function devKeyringPath(env: NodeJS.ProcessEnv): string {
  const state = env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  return path.join(state, 'toolgate', 'dev-signing-keys.json');
}

/**
 * The development keyring: every identity's keys, generated once per machine (file mode 0600) so
 * that the services a newcomer starts as separate processes — and the tests, the chaos and bench
 * stacks — agree without configuring anything. Never used where keys are required (production).
 * Two processes creating it at once agree on the first one written (an exclusive link).
 */
export function devKeySet(env: NodeJS.ProcessEnv): KeySet {
  const file = devKeyringPath(env);
  const existing = readKeySet(file);
  if (existing) return existing;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, JSON.stringify(generateKeySet(), null, 2) + '\n', { mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  const created = readKeySet(file);
  if (!created) throw new ConfigError(`the development keyring ${file} is not a full key set`);
  return created;
}

function readKeySet(file: string): KeySet | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const parsed = KeysFileSchema.safeParse(safeJson(text));
  const privateKeys = parsed.success ? parsed.data.privateKeys : undefined;
  if (
    !parsed.success ||
    !privateKeys ||
    !SERVICE_IDENTITIES.every((id) => privateKeys[id] && parsed.data.publicKeys[id])
  ) {
    throw new ConfigError(
      `the development keyring ${file} is not a full key set; delete it to have a new one generated`,
    );
  }
  return {
    privateKeys: privateKeys as Record<ServiceIdentity, string>,
    publicKeys: parsed.data.publicKeys as Record<ServiceIdentity, string>,
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Where a service's signing keys come from (parsed from the environment by `natsSettings`). */
export interface SigningSettings {
  /** `TOOLGATE_SIGNING_KEY`: this service's private key. */
  readonly privateKey?: string;
  /** `TOOLGATE_SIGNING_PUBLIC_KEYS`: the JSON public key map. */
  readonly publicKeys?: string;
  /** `TOOLGATE_SIGNING_KEYS_FILE`. */
  readonly keysFile?: string;
  /** Start only with configured keys (`TOOLGATE_REQUIRE_SIGNING_KEYS=true`, or NODE_ENV=production). */
  readonly required: boolean;
  /** `XDG_STATE_HOME`, for the development keyring. */
  readonly stateHome?: string;
  /** A whole key set held in process (the all-in-one's ephemeral one): each service takes its own key. */
  readonly keySet?: KeySet;
  /** `TOOLGATE_EVENT_SIGNATURES`: what it signs events with (`v2` when absent). */
  readonly eventSignatures?: EventSignatures;
}

/**
 * The signing settings in an environment: `TOOLGATE_SIGNING_KEY`, `TOOLGATE_SIGNING_PUBLIC_KEYS`,
 * `TOOLGATE_SIGNING_KEYS_FILE`, whether they are required (`TOOLGATE_REQUIRE_SIGNING_KEYS=true`,
 * or `NODE_ENV=production` unless that variable says `false`) and `TOOLGATE_EVENT_SIGNATURES`
 * (a value other than `v1` or `v2` is a {@link ConfigError}).
 */
export function signingSettingsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): SigningSettings {
  const eventSignatures = env.TOOLGATE_EVENT_SIGNATURES;
  if (
    eventSignatures !== undefined &&
    !(EVENT_SIGNATURES as readonly string[]).includes(eventSignatures)
  ) {
    throw new ConfigError(
      `TOOLGATE_EVENT_SIGNATURES must be one of ${EVENT_SIGNATURES.join(', ')}`,
      {
        details: { allowed: EVENT_SIGNATURES },
      },
    );
  }
  return {
    ...(eventSignatures ? { eventSignatures: eventSignatures as EventSignatures } : {}),
    ...(env.TOOLGATE_SIGNING_KEY ? { privateKey: env.TOOLGATE_SIGNING_KEY } : {}),
    ...(env.TOOLGATE_SIGNING_PUBLIC_KEYS ? { publicKeys: env.TOOLGATE_SIGNING_PUBLIC_KEYS } : {}),
    ...(env.TOOLGATE_SIGNING_KEYS_FILE ? { keysFile: env.TOOLGATE_SIGNING_KEYS_FILE } : {}),
    required:
      env.TOOLGATE_REQUIRE_SIGNING_KEYS === 'true' ||
      (env.TOOLGATE_REQUIRE_SIGNING_KEYS !== 'false' && env.NODE_ENV === 'production'),
    ...(env.XDG_STATE_HOME ? { stateHome: env.XDG_STATE_HOME } : {}),
  };
}

/**
 * The signing keys of `identity`: from the in-process key set, from `TOOLGATE_SIGNING_KEY` and
 * `TOOLGATE_SIGNING_PUBLIC_KEYS` (either may instead come from `TOOLGATE_SIGNING_KEYS_FILE`), or —
 * only where keys are not required — this machine's development keyring. A {@link ConfigError}
 * says what is missing or malformed and never contains key material. There is no unsigned mode.
 */
export function resolveServiceKeys(
  identity: ServiceIdentity,
  settings: SigningSettings | undefined,
): ServiceKeys {
  const s = settings ?? { required: false };
  const signs = s.eventSignatures ?? 'v2';
  if (s.keySet) return ServiceKeys.ofSet(identity, s.keySet, signs);
  const file = s.keysFile ? readKeysFile(s.keysFile) : undefined;
  const privateKey = s.privateKey ?? file?.privateKey ?? file?.privateKeys?.[identity];
  const publicKeys = s.publicKeys !== undefined ? parsePublicKeys(s.publicKeys) : file?.publicKeys;
  if (privateKey && publicKeys) return ServiceKeys.from(identity, privateKey, publicKeys, signs);
  if (privateKey || publicKeys || s.keysFile || s.required) {
    throw new ConfigError(
      `${identity} needs its signing key and every identity's public key: set TOOLGATE_SIGNING_KEY and TOOLGATE_SIGNING_PUBLIC_KEYS, or TOOLGATE_SIGNING_KEYS_FILE (\`toolgate keys generate\`)` +
        (privateKey
          ? '; the public keys are missing'
          : publicKeys
            ? '; the private key is missing'
            : ''),
      { details: { identity } },
    );
  }
  const env = s.stateHome ? { XDG_STATE_HOME: s.stateHome } : {};
  try {
    return ServiceKeys.ofSet(identity, devKeySet(env), signs);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(
      `could not read or create the development signing keyring ${devKeyringPath(env)}: ${(err as Error).message}`,
    );
  }
}

function readKeysFile(file: string) {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `TOOLGATE_SIGNING_KEYS_FILE ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  return parseKeysFile(text, `TOOLGATE_SIGNING_KEYS_FILE ${file}`);
}

/**
 * A keys file's text as a {@link KeysFile}, or a ConfigError naming `source` (what the text was
 * read from) and never the text, which holds private keys.
 */
export function parseKeysFile(text: string, source: string): KeysFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(`${source} is not JSON`);
  }
  const parsed = KeysFileSchema.safeParse(json);
  if (!parsed.success)
    throw new ConfigError(
      `${source} is not a keys file ({ privateKey | privateKeys, publicKeys })`,
    );
  return parsed.data;
}

function parsePublicKeys(text: string): Record<string, string> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError('TOOLGATE_SIGNING_PUBLIC_KEYS is not JSON');
  }
  const parsed = PublicKeysSchema.safeParse(json);
  if (!parsed.success)
    throw new ConfigError(
      'TOOLGATE_SIGNING_PUBLIC_KEYS must be a JSON object of identity → base64 public key',
    );
  return parsed.data;
}
