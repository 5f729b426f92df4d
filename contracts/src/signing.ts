import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hash,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { z } from 'zod';
import { ConfigError, ErrorCode, ToolgateError } from './errors';
import type { JournalEventType } from './events';
import { HmacSha256Key } from './hmac-sha256';
import { NonceCache } from './nonce-cache';
import { toolRequestKeyOf } from './remote-auth';
import {
  JournalOperation,
  QueryOperation,
  WorktreeOperation,
  eventTypeOfSubject,
  type Subjects,
} from './subjects';

/**
 * Who may write what on the bus, and how a reader knows: journal events and internal requests are
 * signed by the service that produced them, for each service that reads them.
 *
 * Scheme: HMAC-SHA256 with pairwise keys. Every internal identity has a static X25519 key pair;
 * the key for messages from `a` to `b` is HKDF-SHA256(X25519(a, b), info `toolgate/v1/<a>-><b>`),
 * which `a` computes from its private key and `b`'s public one and `b` from its private key and
 * `a`'s public one. A service holds only its own private key, so it can compute the keys of the
 * pairs it is part of and no others: the gateway cannot compute K(permission-evaluator ->
 * tool-executor) and cannot forge a `decided`. An HMAC costs microseconds where an Ed25519 verify
 * costs 50–100 (see docs/threat-model.md).
 *
 * Events are signed with construction v2 (v1 under `TOOLGATE_EVENT_SIGNATURES=v1`, for a rolling
 * upgrade from a release that reads v1 alone) and read in either: a stream holds v1 events, and
 * the journal's start-up fold and rebuild verify every event in it.
 * - v1: HMAC(K, `v1\n<subject>\n<payload bytes>`) — one native HMAC over the whole event per
 *   reader, 3–5 µs each whatever the size (the cost is the call, not the bytes);
 * - v2: HMAC(K, `v2\n` ‖ SHA-256(`<subject>\n<payload bytes>`)) — the event hashed once, then per
 *   reader an HMAC of 35 bytes, two SHA-256 compressions in JavaScript ({@link HmacSha256Key}: the
 *   key's pads absorbed once, no native call). It binds the subject and the whole payload as v1
 *   does, as long as SHA-256 is collision resistant (as any signature over a digest).
 * The HMAC inputs of v1, v2 and requests begin `v1\n`, `v2\n` and `v1-request\n`: no MAC of one is
 * a MAC of another, so a signature moved from one construction's header to the other's fails
 * verification, and since v1 is as strong as v2, accepting both downgrades nothing.
 *
 * On the wire (NATS headers, names stable):
 * - `Toolgate-Signer: <identity>` — who produced the message;
 * - an event (v2): `Toolgate-Sigs: v2 <reader>=<base64url HMAC> <reader>=<…> …`, one entry per
 *   reader of its type in one header (nats.js spends about a microsecond on each header it sets,
 *   as much as a v2 MAC);
 * - an event (v1, read only): `Toolgate-Sig-<reader>: <base64url HMAC>`, one header per reader;
 *   a message with a `Toolgate-Sigs` header is read as v2 alone;
 * - a request: `Toolgate-Sig-<responder>: <base64url HMAC>` over
 *   `v1-request\n<subject>\n<signed-at>\n<nonce>\n<payload bytes>`, with `Toolgate-Signed-At`
 *   (ms since the epoch) and `Toolgate-Nonce`.
 */

/** The internal identities that hold a signing key. `ops` signs operators' requests. */
export const ServiceIdentity = {
  Gateway: 'gateway',
  Evaluator: 'permission-evaluator',
  Executor: 'tool-executor',
  Journal: 'journal',
  Worktree: 'worktree',
  Ops: 'ops',
} as const;
export type ServiceIdentity = (typeof ServiceIdentity)[keyof typeof ServiceIdentity];
export const SERVICE_IDENTITIES: readonly ServiceIdentity[] = Object.values(ServiceIdentity);

/** Whether `value` names an internal identity. */
export function isServiceIdentity(value: unknown): value is ServiceIdentity {
  return (SERVICE_IDENTITIES as readonly unknown[]).includes(value);
}

/** The signature headers (see the module comment). */
export const SignatureHeader = {
  Signer: 'Toolgate-Signer',
  /** An event's signatures for all its readers (v2): `v2 journal=<MAC> ops=<MAC> …`. */
  Sigs: 'Toolgate-Sigs',
  /**
   * Followed by the reader's identity, `Toolgate-Sig-journal`: a request's signature for its
   * responder, and an event's for each reader in v1.
   */
  SigPrefix: 'Toolgate-Sig-',
  SignedAt: 'Toolgate-Signed-At',
  Nonce: 'Toolgate-Nonce',
} as const;

/** Who produces one journal event type and who reads it (and so gets a signature of it). */
export interface EventSigning {
  readonly producers: readonly ServiceIdentity[];
  readonly readers: readonly ServiceIdentity[];
}

const G = ServiceIdentity.Gateway;
const E = ServiceIdentity.Evaluator;
const X = ServiceIdentity.Executor;
const J = ServiceIdentity.Journal;
const W = ServiceIdentity.Worktree;
const O = ServiceIdentity.Ops;
const worktreeEvent: EventSigning = { producers: [W], readers: [J, O] };

/**
 * For each journal event type, who may produce it and who reads it. The journal (projection,
 * start-up fold, rebuild) and `ops` (`toolgate journal tail`) read everything; the rest read what
 * their consumers, direct gets, waits and replays read:
 * - `requested`: the gateway submits it; the evaluator decides it, the executor checks a decision
 *   against it, the gateway reads it for a model retry and a what-if.
 * - `decided`, `suspended`: the evaluator; the executor runs `decided`, the gateway shows both in
 *   an approval, waits for `suspended` and replays `decided` in a what-if; the evaluator reads its
 *   own `decided` back when its append lost.
 * - `resolved`: the gateway (approvals API) and the journal (the approval timeout sweep); the
 *   executor runs it, both producers read the winner back when theirs lost.
 * - `started`: the executor's claim, read back only by executors.
 * - `settled`: the executor, and the evaluator for a deny, an error-cap refusal or a poisoned
 *   `requested`; the executor checks it before running, the gateway waits for it.
 * - `error-streak`: whoever settles (evaluator, executor) and the gateway's reset; all three read
 *   the last one.
 * - `script-installed`: the gateway; `worktree-*`: the worktree service; only the journal reads them.
 */
export const EVENT_SIGNING: Readonly<Record<JournalEventType, EventSigning>> = {
  requested: { producers: [G], readers: [J, E, X, G, O] },
  decided: { producers: [E], readers: [J, X, G, E, O] },
  suspended: { producers: [E], readers: [J, X, G, O] },
  resolved: { producers: [G, J], readers: [J, X, G, O] },
  started: { producers: [X], readers: [J, X, O] },
  settled: { producers: [E, X], readers: [J, X, G, O] },
  'error-streak': { producers: [G, E, X], readers: [J, E, X, G, O] },
  'script-installed': { producers: [G], readers: [J, O] },
  'worktree-acquired': worktreeEvent,
  'worktree-collected': worktreeEvent,
  'worktree-retained': worktreeEvent,
  'worktree-dropped': worktreeEvent,
  'worktree-disposed': worktreeEvent,
  'worktree-restarted': worktreeEvent,
};

/** An internal request subject: who answers it and who may ask. */
export interface RequestSigning {
  readonly responder: ServiceIdentity;
  readonly requesters: readonly ServiceIdentity[];
}

/**
 * The internal request/reply subjects and who may send them: the journal's queries only the
 * gateway (which takes the tenant from a verified token), a worktree acquire only the executor,
 * collect and dispose only an operator (as deploy/nats grants them), a journal rebuild only an
 * operator.
 */
function internalRequests(subjects: Subjects): ReadonlyMap<string, RequestSigning> {
  const map = new Map<string, RequestSigning>();
  for (const op of Object.values(QueryOperation))
    map.set(subjects.query(op), { responder: J, requesters: [G] });
  map.set(subjects.worktree(WorktreeOperation.Acquire), { responder: W, requesters: [X] });
  map.set(subjects.worktree(WorktreeOperation.Collect), { responder: W, requesters: [O] });
  map.set(subjects.worktree(WorktreeOperation.Dispose), { responder: W, requesters: [O] });
  map.set(subjects.ops(JournalOperation.Rebuild), { responder: J, requesters: [O] });
  // A caller's cancellation, which the gateway forwards for the tenant of a verified token.
  map.set(subjects.cancelDispatch, { responder: X, requesters: [G] });
  // An admin's import of a stdio MCP upstream, which only the executor's sandbox runs.
  map.set(subjects.mcpListTools, { responder: X, requesters: [G] });
  return map;
}

/**
 * Who answers `subject` and who may send it. Every responder and sender names one of the subjects
 * of {@link internalRequests}, so another subject is a bug: it throws `internal` at start-up
 * rather than serving a subject nobody may sign for.
 */
export function requestSigningOf(subjects: Subjects, subject: string): RequestSigning {
  const signing = internalRequests(subjects).get(subject);
  if (!signing)
    throw new ToolgateError(ErrorCode.Internal, `${subject} is not an internal request subject`, {
      details: { subject },
    });
  return signing;
}

/** Why a message was not trusted: a label of `toolgate_untrusted_events_total`. */
export const UntrustedReason = {
  /** No signer, or no signature for this reader. */
  Unsigned: 'unsigned',
  /** The signer is not an identity this service has a public key of. */
  UnknownSigner: 'unknown-signer',
  /** The signer may not produce this event type (or send this request). */
  WrongProducer: 'wrong-producer',
  /** The signature does not match the subject and payload. */
  BadSignature: 'bad-signature',
  /** The payload's event type is not the one its subject names. */
  SubjectMismatch: 'subject-mismatch',
  /** A request signed too long ago (or too far in the future): a replay. */
  Stale: 'stale',
  /** A request whose nonce this responder has already accepted from its signer: a replay. */
  Replayed: 'replayed',
} as const;
export type UntrustedReason = (typeof UntrustedReason)[keyof typeof UntrustedReason];

/** How far a request's `Toolgate-Signed-At` may be from the responder's clock. */
export const REQUEST_MAX_AGE_MS = 60_000;

/**
 * How many accepted request nonces one service remembers at most (see {@link NonceCache}): each is
 * held until its request would be stale, about {@link REQUEST_MAX_AGE_MS} when clocks agree, so
 * this admits ~1,600 signed requests a second per responding process, in ~10 MB at most.
 */
export const REQUEST_NONCE_CAPACITY = 100_000;

/** The header access signing needs (nats.js `MsgHdrs` has it). `get` answers '' when absent. */
export interface SignatureHeaders {
  get(name: string): string;
  set(name: string, value: string): void;
}

/** A fresh set of keys for every identity, as `toolgate keys generate` prints it (base64 DER). */
export interface KeySet {
  privateKeys: Record<ServiceIdentity, string>;
  publicKeys: Record<ServiceIdentity, string>;
}

const Base64 = z.string().regex(/^[A-Za-z0-9+/]+={0,2}$/, 'must be base64');
/** A public key map: identity → base64 SPKI DER of its X25519 key. */
export const PublicKeysSchema = z.record(z.string(), Base64);
/**
 * A keys file (`TOOLGATE_SIGNING_KEYS_FILE`): this service's `privateKey`, or `privateKeys` by
 * identity (a development keyring, or `toolgate keys generate --json`), and `publicKeys`.
 */
export const KeysFileSchema = z.object({
  privateKey: Base64.optional(),
  privateKeys: z.record(z.string(), Base64).optional(),
  publicKeys: PublicKeysSchema,
});
export type KeysFile = z.infer<typeof KeysFileSchema>;

/** Generates a key pair for every identity. */
export function generateKeySet(): KeySet {
  const privateKeys = {} as Record<ServiceIdentity, string>;
  const publicKeys = {} as Record<ServiceIdentity, string>;
  for (const id of SERVICE_IDENTITIES) {
    const pair = generateKeyPairSync('x25519');
    privateKeys[id] = pair.privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
    publicKeys[id] = pair.publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
  }
  return { privateKeys, publicKeys };
}

/**
 * What journal readers and writers need of keys: {@link ServiceKeys} is one service's; a test
 * may hold one that signs every type as its producer would.
 */
export interface EventKeys {
  signEvent(
    subject: string,
    type: JournalEventType,
    payload: Uint8Array,
    headers: SignatureHeaders,
  ): void;
  verifyEvent(
    subject: string,
    payload: Uint8Array,
    headers: SignatureHeaders | undefined,
  ): UntrustedReason | null;
}

/**
 * The construction a service signs events with (`TOOLGATE_EVENT_SIGNATURES`): `v2`, or `v1` while
 * a service of a release before v2 still reads the journal (a rolling upgrade from one), since
 * such a release reads v1 alone. Every release since reads both.
 */
export type EventSignatures = 'v1' | 'v2';
export const EVENT_SIGNATURES: readonly EventSignatures[] = ['v1', 'v2'];

/** A verified request: who sent it. */
export type RequestCheck =
  { ok: true; signer: ServiceIdentity } | { ok: false; reason: UntrustedReason };

const V1 = Buffer.from('v1\n');
const V2 = Buffer.from('v2\n');
const V1_REQUEST = Buffer.from('v1-request\n');
const NL = Buffer.from('\n');
/** What starts the value of `Toolgate-Sigs` in v2; each entry follows a space. */
const V2_SIGS = 'v2';

/**
 * One service's signing keys: its own private key and every identity's public key, from which the
 * pairwise keys it takes part in are derived once. Signs what it produces for each reader and
 * verifies what it reads. Key material never appears in an error message or a log line.
 */
export class ServiceKeys implements EventKeys {
  /**
   * K(this -> reader), by reader: raw bytes for `createHmac` (v1 events, requests; a `KeyObject`
   * made by `createSecretKey` measured no faster) and with its pads absorbed for v2.
   */
  private readonly sendKeys = new Map<ServiceIdentity, PairKey>();
  /** K(producer -> this), by producer. */
  private readonly receiveKeys = new Map<ServiceIdentity, PairKey>();
  /** The nonces of the requests this process has accepted, by signer: a second use is a replay. */
  private readonly nonces = new NonceCache(REQUEST_NONCE_CAPACITY);

  private toolRequest: KeyObject | undefined;

  /**
   * The Ed25519 key the executor signs remote tool requests with, derived from this identity's
   * X25519 key (see remote-auth.ts); its public key is what workers are configured with.
   */
  get toolRequestKey(): KeyObject {
    return (this.toolRequest ??= toolRequestKeyOf(this.privateKey));
  }

  private constructor(
    readonly identity: ServiceIdentity,
    private readonly privateKey: KeyObject,
    publicKeys: ReadonlyMap<ServiceIdentity, KeyObject>,
    /** What {@link signEvent} writes; reading takes both. */
    readonly eventSignatures: EventSignatures,
  ) {
    for (const [peer, publicKey] of publicKeys) {
      const shared = diffieHellman({ privateKey, publicKey });
      this.sendKeys.set(peer, pairKey(shared, identity, peer));
      this.receiveKeys.set(peer, pairKey(shared, peer, identity));
    }
  }

  /**
   * The keys of `identity` from its base64 private key and the public key map. Throws a
   * {@link ConfigError} that names what is wrong but never the key material: a key that does not
   * decode, a public key missing for an identity, or a private key that is not the one whose
   * public key the map lists for `identity`.
   */
  static from(
    identity: ServiceIdentity,
    privateKeyBase64: string,
    publicKeysBase64: Readonly<Record<string, string>>,
    eventSignatures: EventSignatures = 'v2',
  ): ServiceKeys {
    let privateKey: KeyObject;
    try {
      privateKey = createPrivateKey({
        key: Buffer.from(privateKeyBase64, 'base64'),
        format: 'der',
        type: 'pkcs8',
      });
    } catch {
      throw new ConfigError(`the signing key of ${identity} is not a base64 X25519 private key`, {
        details: { identity },
      });
    }
    if (privateKey.asymmetricKeyType !== 'x25519') {
      throw new ConfigError(`the signing key of ${identity} is not an X25519 key`, {
        details: { identity },
      });
    }
    const publicKeys = new Map<ServiceIdentity, KeyObject>();
    for (const [peer, value] of Object.entries(publicKeysBase64)) {
      if (!isServiceIdentity(peer)) {
        throw new ConfigError(`the signing public keys name an unknown identity ${peer}`, {
          details: { identity: peer, known: SERVICE_IDENTITIES },
        });
      }
      try {
        const key = createPublicKey({
          key: Buffer.from(value, 'base64'),
          format: 'der',
          type: 'spki',
        });
        if (key.asymmetricKeyType !== 'x25519') throw new Error('not x25519');
        publicKeys.set(peer, key);
      } catch {
        throw new ConfigError(`the signing public key of ${peer} is not a base64 X25519 key`, {
          details: { identity: peer },
        });
      }
    }
    const missing = SERVICE_IDENTITIES.filter((id) => !publicKeys.has(id));
    if (missing.length) {
      throw new ConfigError(`the signing public keys lack ${missing.join(', ')}`, {
        details: { missing },
      });
    }
    const own = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
    const listed = publicKeys.get(identity)!.export({ format: 'der', type: 'spki' });
    if (!own.equals(listed)) {
      throw new ConfigError(
        `the signing key of ${identity} does not match its public key in the public key map`,
        { details: { identity } },
      );
    }
    return new ServiceKeys(identity, privateKey, publicKeys, eventSignatures);
  }

  /** The keys of `identity` out of a full key set (the all-in-one, tests, a dev keyring). */
  static ofSet(
    identity: ServiceIdentity,
    set: KeySet,
    eventSignatures: EventSignatures = 'v2',
  ): ServiceKeys {
    return ServiceKeys.from(identity, set.privateKeys[identity], set.publicKeys, eventSignatures);
  }

  /**
   * Signs a journal event this service publishes on `subject`, for every reader of its type: sets
   * `Toolgate-Signer` and `Toolgate-Sigs` (v2, an entry per reader), or one `Toolgate-Sig-<reader>`
   * per reader when this service signs v1. Throws a {@link ConfigError}
   * when this identity does not produce `type` (the table and the code disagree).
   */
  signEvent(
    subject: string,
    type: JournalEventType,
    payload: Uint8Array,
    headers: SignatureHeaders,
  ): void {
    const signing = EVENT_SIGNING[type];
    if (!signing?.producers.includes(this.identity)) {
      throw new ConfigError(`${this.identity} does not produce ${type} events`, {
        details: { identity: this.identity, type },
      });
    }
    headers.set(SignatureHeader.Signer, this.identity);
    if (this.eventSignatures === 'v1') {
      for (const reader of signing.readers) {
        const key = this.sendKeys.get(reader)!.raw;
        headers.set(SignatureHeader.SigPrefix + reader, eventMacV1(key, subject, payload));
      }
      return;
    }
    const message = eventMessageV2(subject, payload);
    let sigs = V2_SIGS;
    for (const reader of signing.readers)
      sigs += ` ${reader}=${this.sendKeys.get(reader)!.absorbed.mac(message).toString('base64url')}`;
    headers.set(SignatureHeader.Sigs, sigs);
  }

  /**
   * Verifies a journal event read from `subject`: signed by an identity that may produce the type
   * the subject names, with a valid signature for this reader (v2, or v1 as events written before
   * v2 are). Null when it is trusted, or why not. The caller still checks that the payload's type
   * is the subject's (`SubjectMismatch`).
   */
  verifyEvent(
    subject: string,
    payload: Uint8Array,
    headers: SignatureHeaders | undefined,
  ): UntrustedReason | null {
    const signer = headers?.get(SignatureHeader.Signer) ?? '';
    const sigs = headers?.get(SignatureHeader.Sigs) ?? '';
    const sig = sigs
      ? v2SigOf(sigs, this.identity)
      : (headers?.get(SignatureHeader.SigPrefix + this.identity) ?? '');
    if (!signer || !sig) return UntrustedReason.Unsigned;
    if (!isServiceIdentity(signer)) return UntrustedReason.UnknownSigner;
    const type = eventTypeOfSubject(subject) as JournalEventType;
    if (!EVENT_SIGNING[type]?.producers.includes(signer)) return UntrustedReason.WrongProducer;
    const key = this.receiveKeys.get(signer);
    if (!key) return UntrustedReason.UnknownSigner;
    const expected = sigs
      ? key.absorbed.mac(eventMessageV2(subject, payload)).toString('base64url')
      : eventMacV1(key.raw, subject, payload);
    return macEquals(expected, sig) ? null : UntrustedReason.BadSignature;
  }

  /** Signs a request this service sends to `responder` on `subject` (with a timestamp and nonce). */
  signRequest(
    subject: string,
    responder: ServiceIdentity,
    payload: Uint8Array,
    headers: SignatureHeaders,
    nowMs: number = Date.now(),
  ): void {
    const signedAt = String(nowMs);
    const nonce = randomBytes(12).toString('base64url');
    headers.set(SignatureHeader.Signer, this.identity);
    headers.set(SignatureHeader.SignedAt, signedAt);
    headers.set(SignatureHeader.Nonce, nonce);
    headers.set(
      SignatureHeader.SigPrefix + responder,
      requestMac(this.sendKeys.get(responder)!.raw, subject, signedAt, nonce, payload),
    );
  }

  /**
   * Verifies a request this service answers on `subject`: signed for it by one of `requesters`,
   * within {@link REQUEST_MAX_AGE_MS} of `nowMs`, with a nonce this process has not accepted from
   * its signer before (`replayed`). Only a request whose signature verifies is remembered, so a
   * forger cannot fill the memory; when it is full of unexpired nonces this throws an `unavailable`
   * {@link ToolgateError} (retryable) rather than forget one (see {@link NonceCache}).
   *
   * The memory is this process's: a replay that a queue group hands to another replica of the
   * responder within the window is not recognised there.
   */
  verifyRequest(
    subject: string,
    payload: Uint8Array,
    headers: SignatureHeaders | undefined,
    requesters: readonly ServiceIdentity[],
    nowMs: number = Date.now(),
  ): RequestCheck {
    const signer = headers?.get(SignatureHeader.Signer) ?? '';
    const sig = headers?.get(SignatureHeader.SigPrefix + this.identity) ?? '';
    const signedAt = headers?.get(SignatureHeader.SignedAt) ?? '';
    const nonce = headers?.get(SignatureHeader.Nonce) ?? '';
    if (!signer || !sig || !signedAt || !nonce)
      return { ok: false, reason: UntrustedReason.Unsigned };
    if (!isServiceIdentity(signer)) return { ok: false, reason: UntrustedReason.UnknownSigner };
    if (!requesters.includes(signer)) return { ok: false, reason: UntrustedReason.WrongProducer };
    const key = this.receiveKeys.get(signer);
    if (!key) return { ok: false, reason: UntrustedReason.UnknownSigner };
    if (!macEquals(requestMac(key.raw, subject, signedAt, nonce, payload), sig))
      return { ok: false, reason: UntrustedReason.BadSignature };
    const at = Number(signedAt);
    if (!Number.isFinite(at) || Math.abs(nowMs - at) > REQUEST_MAX_AGE_MS)
      return { ok: false, reason: UntrustedReason.Stale };
    const use = this.nonces.use(`${signer} ${nonce}`, at + REQUEST_MAX_AGE_MS, nowMs);
    if (use === 'replayed') return { ok: false, reason: UntrustedReason.Replayed };
    if (use === 'full') {
      throw new ToolgateError(
        ErrorCode.Unavailable,
        'too many signed requests in the last minute to tell a replay from a new one: try again',
        { details: { capacity: this.nonces.capacity } },
      );
    }
    return { ok: true, signer };
  }
}

/** One pairwise key, in the two forms its MACs use. */
interface PairKey {
  readonly raw: Buffer;
  readonly absorbed: HmacSha256Key;
}

function pairKey(shared: Buffer, from: ServiceIdentity, to: ServiceIdentity): PairKey {
  const raw = Buffer.from(
    hkdfSync('sha256', shared, Buffer.alloc(0), `toolgate/v1/${from}->${to}`, 32),
  );
  return { raw, absorbed: new HmacSha256Key(raw) };
}

/**
 * `reader`'s MAC in a `Toolgate-Sigs` value, or '' when it has none or the value is not v2 (a
 * later construction this release cannot check: unsigned, for this reader).
 */
function v2SigOf(sigs: string, reader: ServiceIdentity): string {
  if (!sigs.startsWith(`${V2_SIGS} `)) return '';
  const entry = ` ${reader}=`;
  const at = sigs.indexOf(entry);
  if (at < 0) return '';
  const start = at + entry.length;
  const end = sigs.indexOf(' ', start);
  return sigs.slice(start, end < 0 ? undefined : end);
}

/** What a v2 event MAC is over: `v2\n` ‖ SHA-256(`<subject>\n<payload>`), 35 bytes. */
function eventMessageV2(subject: string, payload: Uint8Array): Buffer {
  // One buffer and a one-shot hash: a `createHash` object with three updates costs more.
  const subjectBytes = Buffer.byteLength(subject);
  const hashed = Buffer.allocUnsafe(subjectBytes + 1 + payload.length);
  hashed.write(subject, 0);
  hashed[subjectBytes] = NL[0]!;
  hashed.set(payload, subjectBytes + 1);
  const message = Buffer.allocUnsafe(V2.length + 32);
  V2.copy(message, 0);
  hash('sha256', hashed, 'buffer').copy(message, V2.length);
  return message;
}

function eventMacV1(key: Buffer, subject: string, payload: Uint8Array): string {
  return createHmac('sha256', key)
    .update(V1)
    .update(subject)
    .update(NL)
    .update(payload)
    .digest('base64url');
}

function requestMac(
  key: Buffer,
  subject: string,
  signedAt: string,
  nonce: string,
  payload: Uint8Array,
): string {
  return createHmac('sha256', key)
    .update(V1_REQUEST)
    .update(subject)
    .update(NL)
    .update(signedAt)
    .update(NL)
    .update(nonce)
    .update(NL)
    .update(payload)
    .digest('base64url');
}

function macEquals(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}
