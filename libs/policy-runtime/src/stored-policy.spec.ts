import { generateKeyPairSync } from 'node:crypto';
import { ConfigError, ErrorCode } from '@toolgate/contracts';
import { StoredPolicySchema, validateStoredPolicy } from './stored-policy';

function configErrorOf(document: unknown): ConfigError {
  try {
    validateStoredPolicy(document);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(ErrorCode.Config);
    return err as ConfigError;
  }
  throw new Error('expected the policy to be refused');
}

describe('validateStoredPolicy', () => {
  it('accepts an empty document and fills the defaults', () => {
    expect(validateStoredPolicy({})).toEqual({ engine: {}, profiles: {} });
  });

  const hookKey = generateKeyPairSync('ed25519')
    .publicKey.export({ format: 'der', type: 'spki' })
    .toString('base64');

  it('accepts rules, expressions, remote hooks on a known profile and approval settings', () => {
    const policy = validateStoredPolicy({
      engine: {
        deny: [{ tool: 'shell', argv: 'rm **', reason: 'no deleting' }],
        expressions: [{ when: 'input.path.startsWith("/etc")', effect: 'ask' }],
      },
      profiles: { ops: { preset: 'standard' } },
      approvals: { separationOfDuties: true },
      remote: {
        engine: { hooks: [{ name: 'guard', timeoutMs: 100, publicKey: hookKey }] },
        profiles: { ops: { canUseTool: { name: 'ops-gate', unauthenticated: true } } },
      },
    });
    expect(policy.remote?.profiles?.ops?.canUseTool?.name).toBe('ops-gate');
  });

  it('refuses a remote hook or canUseTool with no publicKey unless it is marked unauthenticated', () => {
    expect(configErrorOf({ remote: { engine: { hooks: [{ name: 'guard' }] } } }).message).toContain(
      'remote.engine.hooks "guard" needs a publicKey',
    );
    expect(
      configErrorOf({
        profiles: { ops: {} },
        remote: { profiles: { ops: { canUseTool: { name: 'g' } } } },
      }).message,
    ).toContain('remote.profiles.ops.canUseTool "g" needs a publicKey');
  });

  it('refuses a publicKey that is not a base64 SPKI Ed25519 key, and one next to unauthenticated', () => {
    const x25519 = generateKeyPairSync('x25519')
      .publicKey.export({ format: 'der', type: 'spki' })
      .toString('base64');
    for (const publicKey of ['not-a-key', x25519]) {
      const err = configErrorOf({ remote: { engine: { hooks: [{ name: 'guard', publicKey }] } } });
      expect(err.message).toContain('is not a base64 SPKI Ed25519 public key');
      expect(err.message).not.toContain(publicKey);
    }
    expect(
      configErrorOf({
        remote: {
          engine: { hooks: [{ name: 'guard', publicKey: hookKey, unauthenticated: true }] },
        },
      }).message,
    ).toContain('has a publicKey and unauthenticated');
  });

  it('refuses a CEL expression that does not compile', () => {
    const err = configErrorOf({
      engine: { expressions: [{ when: 'input.path ===', effect: 'deny' }] },
    });
    expect(err.message).toContain('engine expression rule #0');
  });

  it('refuses a CEL expression that does not compile inside a profile too', () => {
    const err = configErrorOf({
      profiles: { ops: { expressions: [{ when: 'input.(', effect: 'ask' }] } },
    });
    expect(err.message).toContain('profile:ops expression rule #0');
  });

  it('refuses a bad argv pattern', () => {
    const err = configErrorOf({ engine: { deny: [{ tool: 'shell', argv: 'rm "unterminated' }] } });
    expect(err.message).toContain('invalid shell pattern');
  });

  it('refuses remote hooks on a profile the document does not define, naming it', () => {
    const err = configErrorOf({
      profiles: { ops: {} },
      remote: { profiles: { opz: { hooks: [{ name: 'guard', unauthenticated: true }] } } },
    });
    expect(err.message).toContain('"opz"');
  });

  it('refuses a remote hook name that is not a subject token, listing the issue path', () => {
    const err = configErrorOf({ remote: { engine: { hooks: [{ name: 'a.b' }] } } });
    expect(err.details).toEqual({
      issues: [expect.objectContaining({ path: ['remote', 'engine', 'hooks', '0', 'name'] })],
    });
  });

  it('refuses unknown keys (strict documents)', () => {
    configErrorOf({ approvals: { separationOfDuty: true } });
    configErrorOf({ rules: [] });
  });

  it('the schema alone does not compile expressions: validation is what catches them', () => {
    expect(
      StoredPolicySchema.safeParse({
        engine: { expressions: [{ when: 'input.path ===', effect: 'deny' }] },
      }).success,
    ).toBe(true);
  });
});
