import { createHash } from 'node:crypto';
import { ErrorCode, ToolgateError, type Scope } from '@toolgate/contracts';
import { TokenAuth, type Access, type Principal } from './token-auth';

const ALICE_TOKEN = 'alice-secret-token-0123456789';
const BOB_TOKEN = 'bob-secret-token-abcdefghijkl';
const OPS_TOKEN = 'ops-secret-token-zyxwvutsrqpo';

const auth = new TokenAuth([
  { token: ALICE_TOKEN, tenant: 'acme', identity: 'user:alice', scopes: ['dispatch'] },
  {
    tokenSha256: createHash('sha256').update(BOB_TOKEN).digest('hex'),
    tenant: 'globex',
    identity: 'user:bob',
    scopes: ['approve'],
  },
  { token: OPS_TOKEN, tenant: 'acme', identity: 'svc:ops', scopes: ['admin'] },
]);

function refusal(fn: () => unknown): ToolgateError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ToolgateError);
    return err as ToolgateError;
  }
  throw new Error('expected a refusal');
}

describe('TokenAuth.authenticate', () => {
  it('resolves a plain-token grant to its principal', () => {
    const principal = auth.authenticate(`Bearer ${ALICE_TOKEN}`);
    expect(principal).toEqual({
      tenant: 'acme',
      identity: 'user:alice',
      scopes: new Set(['dispatch']),
    });
  });

  it('resolves a tokenSha256 grant from the token itself', () => {
    expect(auth.authenticate(`Bearer ${BOB_TOKEN}`)).toMatchObject({
      tenant: 'globex',
      identity: 'user:bob',
    });
  });

  it('accepts any case of the scheme and surrounding whitespace', () => {
    expect(auth.authenticate(`bearer   ${ALICE_TOKEN}  `).identity).toBe('user:alice');
    expect(auth.authenticate(`BEARER ${ALICE_TOKEN}`).identity).toBe('user:alice');
  });

  it.each([
    ['no header', undefined],
    ['a null header', null],
    ['an empty header', ''],
    ['another scheme', `Basic ${ALICE_TOKEN}`],
    ['the bare token', ALICE_TOKEN],
    ['a scheme without a token', 'Bearer '],
    ['two tokens', `Bearer ${ALICE_TOKEN} ${BOB_TOKEN}`],
  ])('refuses %s as unauthorized', (_what, header) => {
    const err = refusal(() => auth.authenticate(header));
    expect(err.code).toBe(ErrorCode.Unauthorized);
    expect(err.message).toBe('missing bearer token');
  });

  it.each([
    ['an unknown token', 'not-a-configured-token-at-all'],
    ['a token differing in one character', `${ALICE_TOKEN.slice(0, -1)}X`],
    ['a prefix of a token', ALICE_TOKEN.slice(0, 10)],
    [
      'the sha256 of a token given as the token',
      createHash('sha256').update(BOB_TOKEN).digest('hex'),
    ],
  ])('refuses %s as unauthorized', (_what, token) => {
    const err = refusal(() => auth.authenticate(`Bearer ${token}`));
    expect(err.code).toBe(ErrorCode.Unauthorized);
    expect(err.message).toBe('invalid bearer token');
  });

  it('never puts the presented token in the error, its message or its wire form', () => {
    for (const token of ['wrong-token-value-123456', ALICE_TOKEN.toUpperCase()]) {
      const err = refusal(() => auth.authenticate(`Bearer ${token}`));
      expect(
        JSON.stringify({ message: err.message, wire: err.toWire(), details: err.details }),
      ).not.toContain(token);
      expect(String(err.stack)).not.toContain(token);
    }
  });
});

describe('TokenAuth with many grants', () => {
  const grants = Array.from({ length: 1000 }, (_, i) => ({
    token: `tenant-token-${String(i).padStart(4, '0')}-0123456789`,
    tenant: `t${i}`,
    identity: `svc:t${i}`,
    scopes: ['dispatch'] as Scope[],
  }));
  const many = new TokenAuth([
    ...grants,
    // The same token granted twice: the later grant wins, as before.
    { ...grants[7]!, tenant: 'later', identity: 'svc:later' },
  ]);

  it("resolves every token to its own grant's principal", () => {
    for (const [i, g] of grants.entries()) {
      if (i === 7) continue;
      expect(many.authenticate(`Bearer ${g.token}`)).toMatchObject({ tenant: `t${i}` });
    }
    expect(many.authenticate(`Bearer ${grants[7]!.token}`).tenant).toBe('later');
  });

  it('refuses a token that differs from a granted one in its last character', () => {
    const near = `${grants[3]!.token.slice(0, -1)}X`;
    expect(refusal(() => many.authenticate(`Bearer ${near}`)).code).toBe(ErrorCode.Unauthorized);
  });
});

describe('TokenAuth.require', () => {
  const principal = (scopes: Scope[]): Principal => ({
    tenant: 'acme',
    identity: 'user:x',
    scopes: new Set(scopes),
  });

  it.each<[Scope[], Access, boolean]>([
    [['dispatch'], 'dispatch', true],
    [['dispatch'], 'approve', false],
    [['dispatch'], 'admin', false],
    [['approve'], 'approve', true],
    [['approve'], 'dispatch', false],
    [['dispatch', 'approve'], 'approve', true],
    [['admin'], 'dispatch', true],
    [['admin'], 'approve', true],
    [['admin'], 'admin', true],
    [['dispatch'], 'read', true],
    [['approve'], 'read', true],
    [['admin'], 'read', true],
    [[], 'read', false],
    [[], 'any', true],
  ])('scopes %j, requiring %s: allowed=%s', (scopes, needed, allowed) => {
    if (allowed) {
      expect(() => TokenAuth.require(principal(scopes), needed)).not.toThrow();
    } else {
      const err = refusal(() => TokenAuth.require(principal(scopes), needed));
      expect(err.code).toBe(ErrorCode.Forbidden);
      expect(err.details).toEqual({ scope: needed });
    }
  });
});
