import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hash,
  hkdfSync,
} from 'node:crypto';
import recordedV1 from '../test/fixtures/signing/v1-decided.json';
import {
  ErrorCode,
  EVENT_SIGNING,
  JOURNAL_EVENT_TYPES,
  REQUEST_NONCE_CAPACITY,
  ServiceKeys,
  SignatureHeader,
  ToolgateError,
  UntrustedReason,
  createSubjects,
  generateKeySet,
  requestSigningOf,
  type ServiceIdentity,
} from './index';

/** A `MsgHdrs`-like map: `get` answers '' when absent. */
function headers(init: Record<string, string> = {}) {
  const map = new Map(Object.entries(init));
  return {
    get: (name: string) => map.get(name) ?? '',
    set: (name: string, value: string) => void map.set(name, value),
    map,
  };
}

const set = generateKeySet();
const keys = (id: ServiceIdentity) => ServiceKeys.ofSet(id, set);
const subjects = createSubjects('sig');
const subject = subjects.journal.event('acme', 'run-1', 'd1', 'decided');
const payload = new TextEncoder().encode('{"type":"decided"}');

describe('event signatures', () => {
  it('names a producer and readers for every event type', () => {
    for (const type of JOURNAL_EVENT_TYPES) {
      expect(EVENT_SIGNING[type].producers.length).toBeGreaterThan(0);
      expect(EVENT_SIGNING[type].readers).toContain('journal');
      expect(EVENT_SIGNING[type].readers).toContain('ops');
    }
  });

  it("a reader verifies a producer's event; pairwise keys agree both ways", () => {
    const h = headers();
    keys('permission-evaluator').signEvent(subject, 'decided', payload, h);
    expect(h.get(SignatureHeader.Signer)).toBe('permission-evaluator');
    for (const reader of EVENT_SIGNING.decided.readers)
      expect(keys(reader).verifyEvent(subject, payload, h)).toBeNull();
  });

  it("refuses a genuine event copied into another partition's subject (the signature covers the partition token)", () => {
    const partitioned = createSubjects('sig', { journalPartitions: 4 });
    const own = partitioned.journal.event('acme', 'run-1', 'd1', 'decided');
    const h = headers();
    keys('permission-evaluator').signEvent(own, 'decided', payload, h);
    const executor = keys('tool-executor');
    expect(executor.verifyEvent(own, payload, h)).toBeNull();
    const home = own.split('.')[2]!;
    for (const partition of ['0', '1', '2', '3'].filter((p) => p !== home)) {
      const copied = own.replace(`.journal.${home}.`, `.journal.${partition}.`);
      expect(copied).not.toBe(own);
      expect(executor.verifyEvent(copied, payload, h)).toBe(UntrustedReason.BadSignature);
    }
  });

  it('refuses another subject, another payload, a missing or foreign signature', () => {
    const h = headers();
    keys('permission-evaluator').signEvent(subject, 'decided', payload, h);
    const executor = keys('tool-executor');
    const other = subjects.journal.event('other', 'run-1', 'd1', 'decided');
    expect(executor.verifyEvent(other, payload, h)).toBe(UntrustedReason.BadSignature);
    expect(executor.verifyEvent(subject, new TextEncoder().encode('{}'), h)).toBe(
      UntrustedReason.BadSignature,
    );
    expect(executor.verifyEvent(subject, payload, headers())).toBe(UntrustedReason.Unsigned);
    expect(executor.verifyEvent(subject, payload, undefined)).toBe(UntrustedReason.Unsigned);
    // Not a reader of started: the worktree service gets no signature of it.
    const s = subjects.journal.event('acme', 'run-1', 'd1', 'started');
    const hs = headers();
    keys('tool-executor').signEvent(s, 'started', payload, hs);
    expect(keys('worktree').verifyEvent(s, payload, hs)).toBe(UntrustedReason.Unsigned);
  });

  it('a gateway cannot pass for the evaluator, nor sign what it does not produce', () => {
    // The gateway signs with its own keys and claims to be the evaluator.
    const gateway = keys('gateway');
    const h = headers();
    gateway.signEvent(
      subjects.journal.event('acme', 'run-1', 'd1', 'requested'),
      'requested',
      payload,
      h,
    );
    h.set(SignatureHeader.Signer, 'permission-evaluator');
    expect(keys('tool-executor').verifyEvent(subject, payload, h)).toBe(
      UntrustedReason.BadSignature,
    );
    expect(() => gateway.signEvent(subject, 'decided', payload, headers())).toThrow(
      expect.objectContaining({ code: 'config' }),
    );
    // A valid signature by an identity that may not produce the type.
    const forged = headers({ [SignatureHeader.Signer]: 'gateway' });
    forged.set(SignatureHeader.SigPrefix + 'tool-executor', 'x'.repeat(43));
    expect(keys('tool-executor').verifyEvent(subject, payload, forged)).toBe(
      UntrustedReason.WrongProducer,
    );
    const unknown = headers({ [SignatureHeader.Signer]: 'mallory' });
    unknown.set(SignatureHeader.SigPrefix + 'tool-executor', 'x');
    expect(keys('tool-executor').verifyEvent(subject, payload, unknown)).toBe(
      UntrustedReason.UnknownSigner,
    );
  });

  it('keys of another set do not verify', () => {
    const h = headers();
    ServiceKeys.ofSet('permission-evaluator', generateKeySet()).signEvent(
      subject,
      'decided',
      payload,
      h,
    );
    expect(keys('tool-executor').verifyEvent(subject, payload, h)).toBe(
      UntrustedReason.BadSignature,
    );
  });
});

describe('event signature constructions: v2 signed, v1 and v2 read', () => {
  const executor = keys('tool-executor');
  const v1SigOf = (reader: ServiceIdentity) => SignatureHeader.SigPrefix + reader;
  type Headers = ReturnType<typeof headers>;
  const signed = () => {
    const h = headers();
    keys('permission-evaluator').signEvent(subject, 'decided', payload, h);
    return h;
  };
  /** `reader`'s MAC in a v2 `Toolgate-Sigs` value. */
  const v2MacOf = (h: Headers, reader: ServiceIdentity) =>
    h.get(SignatureHeader.Sigs).match(new RegExp(` ${reader}=([^ ]*)`))![1]!;
  /** A copy of `h` with `changes` applied (a value of '' removes the header). */
  const edited = (h: Headers, changes: Record<string, string>) => {
    const copy = headers(Object.fromEntries(h.map));
    for (const [name, value] of Object.entries(changes))
      if (value) copy.set(name, value);
      else copy.map.delete(name);
    return copy;
  };
  /** `mac` with one base64url character changed. */
  const flipped = (mac: string) =>
    mac.slice(0, -2) + (mac.at(-2) === 'A' ? 'B' : 'A') + mac.slice(-1);
  const v1 = recordedV1;
  const v1Payload = new TextEncoder().encode(v1.payload);
  const v1Reader = (reader: 'tool-executor' | 'journal') =>
    ServiceKeys.from(
      reader,
      reader === 'journal' ? v1.journalPrivateKey : v1.executorPrivateKey,
      v1.publicKeys,
    );

  it('signs v2: one Toolgate-Sigs header, `v2` and an entry per reader', () => {
    const h = signed();
    const entries = EVENT_SIGNING.decided.readers.map((r) => `${r}=[A-Za-z0-9_-]{43}`);
    expect(h.get(SignatureHeader.Sigs)).toMatch(new RegExp(`^v2 ${entries.join(' ')}$`));
    expect([...h.map.keys()].sort()).toEqual([SignatureHeader.Signer, SignatureHeader.Sigs]);
  });

  it('a service told to sign v1 writes the v1 headers, which every reader still verifies', () => {
    const h = headers();
    ServiceKeys.ofSet('permission-evaluator', set, 'v1').signEvent(subject, 'decided', payload, h);
    expect(h.get(SignatureHeader.Sigs)).toBe('');
    for (const reader of EVENT_SIGNING.decided.readers) {
      expect(h.get(v1SigOf(reader))).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(keys(reader).verifyEvent(subject, payload, h)).toBeNull();
    }
    expect(executor.verifyEvent(subject, new TextEncoder().encode('{}'), h)).toBe(
      UntrustedReason.BadSignature,
    );
  });

  it('v2 is HMAC(K, "v2\\n" ‖ SHA-256(subject "\\n" payload)) under the pairwise key', () => {
    // Computed here from the documented construction, with the key derived as the module
    // comment says, and accepted by the reader: the wire format is pinned.
    const privateKey = createPrivateKey({
      key: Buffer.from(v1.executorPrivateKey, 'base64'),
      format: 'der',
      type: 'pkcs8',
    });
    const publicKey = createPublicKey({
      key: Buffer.from(v1.publicKeys['permission-evaluator'], 'base64'),
      format: 'der',
      type: 'spki',
    });
    const k = Buffer.from(
      hkdfSync(
        'sha256',
        diffieHellman({ privateKey, publicKey }),
        Buffer.alloc(0),
        'toolgate/v1/permission-evaluator->tool-executor',
        32,
      ),
    );
    const digest = hash('sha256', `${v1.subject}\n${v1.payload}`, 'buffer');
    const mac = createHmac('sha256', k).update('v2\n').update(digest).digest('base64url');
    const h = headers({
      [SignatureHeader.Signer]: 'permission-evaluator',
      [SignatureHeader.Sigs]: `v2 journal=${'A'.repeat(43)} tool-executor=${mac}`,
    });
    expect(v1Reader('tool-executor').verifyEvent(v1.subject, v1Payload, h)).toBeNull();
    expect(v1Reader('journal').verifyEvent(v1.subject, v1Payload, h)).toBe(
      UntrustedReason.BadSignature,
    );
  });

  it('still verifies a v1 event as the release before v2 signed it (recorded)', () => {
    const h = headers(v1.headers);
    for (const reader of ['tool-executor', 'journal'] as const) {
      const keysOf = v1Reader(reader);
      const mac = h.get(v1SigOf(reader));
      expect(keysOf.verifyEvent(v1.subject, v1Payload, h)).toBeNull();
      expect(keysOf.verifyEvent(v1.subject.replace('acme', 'other'), v1Payload, h)).toBe(
        UntrustedReason.BadSignature,
      );
      expect(keysOf.verifyEvent(v1.subject, new TextEncoder().encode(`${v1.payload} `), h)).toBe(
        UntrustedReason.BadSignature,
      );
      expect(
        keysOf.verifyEvent(v1.subject, v1Payload, edited(h, { [v1SigOf(reader)]: flipped(mac) })),
      ).toBe(UntrustedReason.BadSignature);
      // A v1 MAC presented as v2 is checked as v2: refused.
      const asV2 = edited(h, { [SignatureHeader.Sigs]: `v2 ${reader}=${mac}` });
      expect(keysOf.verifyEvent(v1.subject, v1Payload, asV2)).toBe(UntrustedReason.BadSignature);
    }
    // The executor's v1 signature in the journal's header: refused by the journal.
    const swapped = edited(h, { [v1SigOf('journal')]: h.get(v1SigOf('tool-executor')) });
    expect(v1Reader('journal').verifyEvent(v1.subject, v1Payload, swapped)).toBe(
      UntrustedReason.BadSignature,
    );
  });

  it('refuses a v2 event with its subject, payload or signature changed, or moved to v1', () => {
    const h = signed();
    expect(executor.verifyEvent(subject, payload, h)).toBeNull();
    expect(
      executor.verifyEvent(subjects.journal.event('acme', 'run-1', 'd2', 'decided'), payload, h),
    ).toBe(UntrustedReason.BadSignature);
    const longer = new Uint8Array(payload.length + 1);
    longer.set(payload);
    longer[payload.length] = 0x20;
    expect(executor.verifyEvent(subject, longer, h)).toBe(UntrustedReason.BadSignature);
    const lastByte = Uint8Array.from(payload);
    lastByte[lastByte.length - 1]! ^= 1;
    expect(executor.verifyEvent(subject, lastByte, h)).toBe(UntrustedReason.BadSignature);
    const mac = v2MacOf(h, 'tool-executor');
    const sigs = h.get(SignatureHeader.Sigs);
    for (const forged of [
      sigs.replace(mac, flipped(mac)),
      sigs.replace(mac, `${mac}A`),
      sigs.replace(mac, mac.slice(1)),
    ])
      expect(
        executor.verifyEvent(subject, payload, edited(h, { [SignatureHeader.Sigs]: forged })),
      ).toBe(UntrustedReason.BadSignature);
    // The v2 MAC moved to the v1 header (the v2 one dropped) is checked as v1: refused.
    const asV1 = edited(h, { [SignatureHeader.Sigs]: '', [v1SigOf('tool-executor')]: mac });
    expect(executor.verifyEvent(subject, payload, asV1)).toBe(UntrustedReason.BadSignature);
    // No entry for this reader, or a construction this release does not know: unsigned.
    for (const other of [
      sigs.replace(' tool-executor=', ' tool-executor-x='),
      `v3${sigs.slice(2)}`,
    ])
      expect(
        executor.verifyEvent(subject, payload, edited(h, { [SignatureHeader.Sigs]: other })),
      ).toBe(UntrustedReason.Unsigned);
  });

  it("refuses another reader's v2 signature", () => {
    const h = signed();
    const sigs = h.get(SignatureHeader.Sigs);
    const gatewayMac = v2MacOf(h, 'gateway');
    const swapped = sigs.replace(gatewayMac, v2MacOf(h, 'tool-executor'));
    expect(
      keys('gateway').verifyEvent(subject, payload, edited(h, { [SignatureHeader.Sigs]: swapped })),
    ).toBe(UntrustedReason.BadSignature);
    // The worktree service reads no decided: given the executor's MAC as its own, it refuses it.
    const worktrees = `${sigs} worktree=${v2MacOf(h, 'tool-executor')}`;
    expect(
      keys('worktree').verifyEvent(
        subject,
        payload,
        edited(h, { [SignatureHeader.Sigs]: worktrees }),
      ),
    ).toBe(UntrustedReason.BadSignature);
  });
});

describe('request signatures', () => {
  const query = subjects.query('run.get');
  const { requesters } = requestSigningOf(subjects, query);

  it('names who answers and who may send each internal request, and refuses any other subject', () => {
    expect(requestSigningOf(subjects, query)).toEqual({
      responder: 'journal',
      requesters: ['gateway'],
    });
    expect(() => requestSigningOf(subjects, subjects.journal.ofType('settled'))).toThrow(
      expect.objectContaining({ code: ErrorCode.Internal }),
    );
  });

  it('the journal accepts a fresh query signed by the gateway, only that', () => {
    const h = headers();
    const now = 1_700_000_000_000;
    keys('gateway').signRequest(query, 'journal', payload, h, now);
    const journal = keys('journal');
    expect(journal.verifyRequest(query, payload, h, requesters, now + 1000)).toEqual({
      ok: true,
      signer: 'gateway',
    });
    expect(journal.verifyRequest(query, payload, h, requesters, now + 61_000)).toEqual({
      ok: false,
      reason: UntrustedReason.Stale,
    });
    expect(
      journal.verifyRequest(subjects.query('dispatch.get'), payload, h, requesters, now),
    ).toEqual({ ok: false, reason: UntrustedReason.BadSignature });
    expect(journal.verifyRequest(query, payload, headers(), requesters, now)).toEqual({
      ok: false,
      reason: UntrustedReason.Unsigned,
    });
    const byOps = headers();
    keys('ops').signRequest(query, 'journal', payload, byOps, now);
    expect(journal.verifyRequest(query, payload, byOps, requesters, now)).toEqual({
      ok: false,
      reason: UntrustedReason.WrongProducer,
    });
  });

  it('answers a signed request once: the same bytes again within the window are a replay', () => {
    const now = 1_700_000_000_000;
    const journal = keys('journal');
    const h = headers();
    keys('gateway').signRequest(query, 'journal', payload, h, now);
    expect(journal.verifyRequest(query, payload, h, requesters, now)).toEqual({
      ok: true,
      signer: 'gateway',
    });
    expect(journal.verifyRequest(query, payload, h, requesters, now + 59_000)).toEqual({
      ok: false,
      reason: UntrustedReason.Replayed,
    });
    // Past the window it is stale, whether remembered or not.
    expect(journal.verifyRequest(query, payload, h, requesters, now + 61_000)).toEqual({
      ok: false,
      reason: UntrustedReason.Stale,
    });
    // A forged request with a nonce the journal accepted does not verify, so it cannot be used to
    // probe (or fill) the memory; a fresh request of the same sender is answered.
    const forged = headers(Object.fromEntries(h.map));
    forged.set(SignatureHeader.SigPrefix + 'journal', 'x'.repeat(43));
    expect(journal.verifyRequest(query, payload, forged, requesters, now)).toEqual({
      ok: false,
      reason: UntrustedReason.BadSignature,
    });
    const again = headers();
    keys('gateway').signRequest(query, 'journal', payload, again, now + 1);
    expect(journal.verifyRequest(query, payload, again, requesters, now + 2).ok).toBe(true);
  });

  it('remembers only a request that verifies: a forgery carrying a fresh nonce does not use it up', () => {
    const now = 1_700_000_000_000;
    const journal = keys('journal');
    const genuine = headers();
    keys('gateway').signRequest(query, 'journal', payload, genuine, now);
    // The forger saw the request go by and races it to the journal with the same nonce.
    const forged = headers(Object.fromEntries(genuine.map));
    forged.set(SignatureHeader.SigPrefix + 'journal', 'x'.repeat(43));
    expect(journal.verifyRequest(query, payload, forged, requesters, now)).toEqual({
      ok: false,
      reason: UntrustedReason.BadSignature,
    });
    expect(journal.verifyRequest(query, payload, genuine, requesters, now)).toEqual({
      ok: true,
      signer: 'gateway',
    });
  });

  it('when its nonce memory is full, refuses a new request as unavailable and keeps the old nonces', () => {
    const now = 1_700_000_000_000;
    const journal = keys('journal');
    const gateway = keys('gateway');
    let first: ReturnType<typeof headers> | undefined;
    for (let i = 0; i < REQUEST_NONCE_CAPACITY; i++) {
      const h = headers();
      gateway.signRequest(query, 'journal', payload, h, now);
      first ??= h;
      if (!journal.verifyRequest(query, payload, h, requesters, now).ok)
        throw new Error(`request ${i} was refused before the memory was full`);
    }
    const more = headers();
    const later = now + 30_000;
    gateway.signRequest(query, 'journal', payload, more, later);
    let refusal: unknown;
    try {
      journal.verifyRequest(query, payload, more, requesters, later);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(ToolgateError);
    expect((refusal as ToolgateError).code).toBe(ErrorCode.Unavailable);
    // Full is no reason to forget: the first nonce is still a replay.
    expect(journal.verifyRequest(query, payload, first!, requesters, later)).toEqual({
      ok: false,
      reason: UntrustedReason.Replayed,
    });
    // Once the held nonces expire (a minute after they were signed) there is room again, and the
    // refused request, still fresh, is answered.
    expect(journal.verifyRequest(query, payload, more, requesters, now + 60_500).ok).toBe(true);
  });
});

describe('loading keys', () => {
  it('names what is wrong, never the key', () => {
    const check = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        const text = JSON.stringify({
          m: (err as Error).message,
          d: (err as { details?: unknown }).details,
        });
        for (const secret of Object.values(set.privateKeys)) expect(text).not.toContain(secret);
        return (err as { code?: string }).code;
      }
      return 'no error';
    };
    expect(check(() => ServiceKeys.from('gateway', 'not base64!', set.publicKeys))).toBe('config');
    expect(check(() => ServiceKeys.from('gateway', set.privateKeys.journal, set.publicKeys))).toBe(
      'config',
    );
    const { ops: _ops, ...lacking } = set.publicKeys;
    expect(check(() => ServiceKeys.from('gateway', set.privateKeys.gateway, lacking))).toBe(
      'config',
    );
  });
});
