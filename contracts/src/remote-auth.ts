import {
  createHash,
  createPrivateKey,
  createPublicKey,
  hkdfSync,
  randomBytes,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { ConfigError } from './errors';
import { NonceCache } from './nonce-cache';

/**
 * Authentication of the two request/reply exchanges with a team's own code on the bus, which a
 * team's process cannot check with Toolgate's pairwise HMAC keys (it holds none): Ed25519, so a
 * verifier needs only a public key. Both hold on an open broker, where anyone may subscribe to a
 * hook or tool subject and answer.
 *
 * **Hook replies** (the permission evaluator asks, a team's hook answers). The hook's public key
 * is registered with the hook in the policy document (`publicKey`: SPKI DER, base64). Each request
 * carries a fresh `Toolgate-Hook-Nonce` (16 random bytes, base64url); the hook signs
 * `toolgate-hook-reply/v1\n<nonce>\n<hex SHA-256 of the request payload>\n<reply payload>` and puts
 * the base64 signature in `Toolgate-Hook-Signature`. The evaluator takes the first reply whose
 * signature verifies; unsigned, mis-signed and replayed replies (signed over another nonce or
 * another request) are ignored, and no valid reply within the hook's timeout denies.
 *
 * **Tool requests** (the executor asks, a team's worker answers). The executor signs
 * `toolgate-tool-request/v1\n<subject>\n<signed-at>\n<nonce>\n<request payload>` with its
 * tool-request key and sends `Toolgate-Request-Signature` (base64), `Toolgate-Signed-At` (ms since
 * the epoch, decimal) and `Toolgate-Nonce` (base64url). A worker configured with the executor's
 * public key runs a request only when the signature verifies, the subject is the one it received it
 * on, the signed-at is within {@link TOOL_REQUEST_MAX_AGE_MS} of its clock, and the nonce is new.
 * The executor's tool-request key is derived from its X25519 signing key (HKDF-SHA256, info
 * {@link TOOL_REQUEST_KEY_INFO}), so it needs no configuration of its own; `toolgate keys
 * tool-request-public-key` prints its public key.
 */
export const RemoteAuthHeader = {
  HookNonce: 'Toolgate-Hook-Nonce',
  HookSignature: 'Toolgate-Hook-Signature',
  RequestSignature: 'Toolgate-Request-Signature',
  SignedAt: 'Toolgate-Signed-At',
  Nonce: 'Toolgate-Nonce',
} as const;

/** How far a tool request's signed-at may be from the worker's clock, either way. */
export const TOOL_REQUEST_MAX_AGE_MS = 60_000;
/** HKDF info of the executor's tool-request key (from its X25519 private key's 32 bytes). */
export const TOOL_REQUEST_KEY_INFO = 'toolgate/v1/tool-request-ed25519';

const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const encoder = new TextEncoder();

/** An Ed25519 public key from its SPKI DER in base64, or a ConfigError naming `what`. */
export function ed25519PublicKey(spkiBase64: string, what: string): KeyObject {
  try {
    const key = createPublicKey({
      key: Buffer.from(spkiBase64, 'base64'),
      format: 'der',
      type: 'spki',
    });
    if (key.asymmetricKeyType === 'ed25519') return key;
  } catch {
    // Reported below without the key material.
  }
  throw new ConfigError(`${what} is not a base64 SPKI Ed25519 public key`);
}

/** An Ed25519 private key: a KeyObject, PEM, or PKCS8 DER in base64. */
export function ed25519PrivateKey(key: KeyObject | string, what: string): KeyObject {
  try {
    const k =
      typeof key !== 'string'
        ? key
        : key.includes('-----BEGIN')
          ? createPrivateKey(key)
          : createPrivateKey({ key: Buffer.from(key, 'base64'), format: 'der', type: 'pkcs8' });
    if (k.type === 'private' && k.asymmetricKeyType === 'ed25519') return k;
  } catch {
    // Reported below without the key material.
  }
  throw new ConfigError(`${what} is not an Ed25519 private key (PEM or base64 PKCS8)`);
}

/** The SPKI DER base64 of a public (or a private key's public) Ed25519 key. */
export function spkiBase64(key: KeyObject): string {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  return pub.export({ format: 'der', type: 'spki' }).toString('base64');
}

/** The executor's tool-request key, derived from its X25519 private key (see the module). */
export function toolRequestKeyOf(x25519PrivateKey: KeyObject | string): KeyObject {
  const x =
    typeof x25519PrivateKey !== 'string'
      ? x25519PrivateKey
      : createPrivateKey({
          key: Buffer.from(x25519PrivateKey, 'base64'),
          format: 'der',
          type: 'pkcs8',
        });
  const d = Buffer.from(x.export({ format: 'jwk' }).d!, 'base64url');
  const seed = Buffer.from(hkdfSync('sha256', d, Buffer.alloc(0), TOOL_REQUEST_KEY_INFO, 32));
  return createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519, seed]),
    format: 'der',
    type: 'pkcs8',
  });
}

/** A fresh nonce: 16 random bytes, base64url. */
export function freshNonce(): string {
  return randomBytes(16).toString('base64url');
}

function hookReplyInput(nonce: string, request: Uint8Array, reply: Uint8Array): Buffer {
  const digest = createHash('sha256').update(request).digest('hex');
  return Buffer.concat([encoder.encode(`toolgate-hook-reply/v1\n${nonce}\n${digest}\n`), reply]);
}

/** A hook's signature (base64) of `reply` to `request` sent with `nonce`. */
export function signHookReply(
  key: KeyObject,
  nonce: string,
  request: Uint8Array,
  reply: Uint8Array,
): string {
  return sign(null, hookReplyInput(nonce, request, reply), key).toString('base64');
}

/** Whether `signature` (base64) is the hook's over (nonce, request digest, reply). */
export function verifyHookReply(
  key: KeyObject,
  nonce: string,
  request: Uint8Array,
  reply: Uint8Array,
  signature: string | undefined,
): boolean {
  if (!signature) return false;
  try {
    return verify(
      null,
      hookReplyInput(nonce, request, reply),
      key,
      Buffer.from(signature, 'base64'),
    );
  } catch {
    return false;
  }
}

function toolRequestInput(
  subject: string,
  signedAt: string,
  nonce: string,
  payload: Uint8Array,
): Buffer {
  return Buffer.concat([
    Buffer.from(`toolgate-tool-request/v1\n${subject}\n${signedAt}\n${nonce}\n`),
    payload,
  ]);
}

/** The headers that authenticate a tool request (see the module). */
export function signToolRequest(
  key: KeyObject,
  subject: string,
  payload: Uint8Array,
  nowMs: number,
): Record<string, string> {
  const signedAt = String(nowMs);
  const nonce = freshNonce();
  return {
    [RemoteAuthHeader.RequestSignature]: sign(
      null,
      toolRequestInput(subject, signedAt, nonce, payload),
      key,
    ).toString('base64'),
    [RemoteAuthHeader.SignedAt]: signedAt,
    [RemoteAuthHeader.Nonce]: nonce,
  };
}

/** Why a worker refused a tool request; undefined when it is authentic and fresh. */
export type ToolRequestRefusal = 'unsigned' | 'bad-signature' | 'stale' | 'replayed' | 'busy';

/**
 * A worker's check of tool requests against the executor's public key: signature, subject,
 * freshness and a nonce seen once within the freshness window.
 */
export class ToolRequestVerifier {
  private readonly key: KeyObject;
  private readonly nonces = new NonceCache(100_000);

  constructor(publicKey: KeyObject | string) {
    this.key =
      typeof publicKey === 'string'
        ? ed25519PublicKey(publicKey, 'the executor public key')
        : publicKey;
  }

  check(
    subject: string,
    header: (name: string) => string | undefined,
    payload: Uint8Array,
    nowMs: number,
  ): ToolRequestRefusal | undefined {
    const signature = header(RemoteAuthHeader.RequestSignature);
    const signedAt = header(RemoteAuthHeader.SignedAt);
    const nonce = header(RemoteAuthHeader.Nonce);
    if (!signature || !signedAt || !nonce) return 'unsigned';
    let ok = false;
    try {
      ok = verify(
        null,
        toolRequestInput(subject, signedAt, nonce, payload),
        this.key,
        Buffer.from(signature, 'base64'),
      );
    } catch {
      ok = false;
    }
    if (!ok || !/^\d{1,16}$/.test(signedAt)) return 'bad-signature';
    const at = Number(signedAt);
    if (Math.abs(nowMs - at) > TOOL_REQUEST_MAX_AGE_MS) return 'stale';
    const use = this.nonces.use(nonce, at + TOOL_REQUEST_MAX_AGE_MS, nowMs);
    if (use === 'replayed') return 'replayed';
    if (use === 'full') return 'busy';
    return undefined;
  }
}
