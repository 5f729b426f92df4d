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

  it('accepts rules, expressions, remote hooks on a known profile and approval settings', () => {
    const policy = validateStoredPolicy({
      engine: {
        deny: [{ tool: 'shell', argv: 'rm **', reason: 'no deleting' }],
        expressions: [{ when: 'input.path.startsWith("/etc")', effect: 'ask' }],
      },
      profiles: { ops: { preset: 'standard' } },
      approvals: { separationOfDuties: true },
      remote: {
        engine: { hooks: [{ name: 'guard', timeoutMs: 100 }] },
        profiles: { ops: { canUseTool: { name: 'ops-gate' } } },
      },
    });
    expect(policy.remote?.profiles?.ops?.canUseTool?.name).toBe('ops-gate');
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
      remote: { profiles: { opz: { hooks: [{ name: 'guard' }] } } },
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
