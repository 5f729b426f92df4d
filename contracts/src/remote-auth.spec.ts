import { generateKeyPairSync } from 'node:crypto';
import { generateKeySet } from './signing';
import {
  ed25519PublicKey,
  signHookReply,
  spkiBase64,
  toolRequestKeyOf,
  verifyHookReply,
} from './remote-auth';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('hook reply signatures', () => {
  const hook = generateKeyPairSync('ed25519');
  const sig = signHookReply(
    hook.privateKey,
    'n1',
    bytes('{"req":1}'),
    bytes('{"verdict":"allow"}'),
  );

  it('verify for the same nonce, request and reply only', () => {
    const ok = (nonce: string, req: string, reply: string, s = sig) =>
      verifyHookReply(hook.publicKey, nonce, bytes(req), bytes(reply), s);
    expect(ok('n1', '{"req":1}', '{"verdict":"allow"}')).toBe(true);
    expect(ok('n2', '{"req":1}', '{"verdict":"allow"}')).toBe(false);
    expect(ok('n1', '{"req":2}', '{"verdict":"allow"}')).toBe(false);
    expect(ok('n1', '{"req":1}', '{"verdict":"deny"}')).toBe(false);
    expect(ok('n1', '{"req":1}', '{"verdict":"allow"}', '')).toBe(false);
    expect(ok('n1', '{"req":1}', '{"verdict":"allow"}', 'not base64 at all!')).toBe(false);
    const other = generateKeyPairSync('ed25519').publicKey;
    expect(
      verifyHookReply(other, 'n1', bytes('{"req":1}'), bytes('{"verdict":"allow"}'), sig),
    ).toBe(false);
  });

  it('public keys must be Ed25519 SPKI', () => {
    expect(ed25519PublicKey(spkiBase64(hook.publicKey), 'k').asymmetricKeyType).toBe('ed25519');
    const x = spkiBase64(generateKeyPairSync('x25519').publicKey);
    expect(() => ed25519PublicKey(x, 'k')).toThrow('k is not a base64 SPKI Ed25519 public key');
  });
});

describe("the executor's tool-request key", () => {
  it('is derived from its X25519 key: the same for the same key, different for another', () => {
    const a = generateKeySet();
    const b = generateKeySet();
    const pub = (k: string) => spkiBase64(toolRequestKeyOf(k));
    expect(pub(a.privateKeys['tool-executor'])).toBe(pub(a.privateKeys['tool-executor']));
    expect(pub(a.privateKeys['tool-executor'])).not.toBe(pub(b.privateKeys['tool-executor']));
    expect(toolRequestKeyOf(a.privateKeys['tool-executor']).asymmetricKeyType).toBe('ed25519');
  });
});
