import {
  EVENT_SIGNING,
  JOURNAL_EVENT_TYPES,
  ServiceKeys,
  SignatureHeader,
  UntrustedReason,
  createSubjects,
  generateKeySet,
  internalRequests,
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

describe('request signatures', () => {
  const query = subjects.query('run.get');
  const { requesters } = internalRequests(subjects).get(query)!;

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
