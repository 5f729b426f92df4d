import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  devKeySet,
  devKeyringPath,
  generateKeySet,
  resolveServiceKeys,
  signingSettingsFromEnv,
} from './index';

describe('where a service finds its signing keys', () => {
  let state: string;
  beforeEach(() => {
    state = mkdtempSync(path.join(os.tmpdir(), 'tg-keys-'));
  });
  afterEach(() => rmSync(state, { recursive: true, force: true }));

  const secretsIn = (err: unknown, secrets: string[]) => {
    const text = JSON.stringify({
      m: (err as Error).message,
      d: (err as { details?: unknown }).details,
    });
    return secrets.filter((s) => text.includes(s));
  };

  it('refuses to start without configured keys in production, saying what is missing', () => {
    for (const env of [{ NODE_ENV: 'production' }, { TOOLGATE_REQUIRE_SIGNING_KEYS: 'true' }]) {
      const settings = signingSettingsFromEnv({ ...env, XDG_STATE_HOME: state });
      expect(() => resolveServiceKeys('gateway', settings)).toThrow(
        expect.objectContaining({
          code: 'config',
          message: expect.stringContaining('TOOLGATE_SIGNING_KEY'),
        }),
      );
    }
    // Compose runs the production image with the development keyring, explicitly.
    const compose = signingSettingsFromEnv({
      NODE_ENV: 'production',
      TOOLGATE_REQUIRE_SIGNING_KEYS: 'false',
      XDG_STATE_HOME: state,
    });
    expect(resolveServiceKeys('gateway', compose).identity).toBe('gateway');
  });

  it('takes its own key and the public map from the environment or a file; half a pair is refused', () => {
    const set = generateKeySet();
    const publicKeys = JSON.stringify(set.publicKeys);
    const fromEnv = resolveServiceKeys(
      'journal',
      signingSettingsFromEnv({
        TOOLGATE_SIGNING_KEY: set.privateKeys.journal,
        TOOLGATE_SIGNING_PUBLIC_KEYS: publicKeys,
        NODE_ENV: 'production',
      }),
    );
    expect(fromEnv.identity).toBe('journal');
    const file = path.join(state, 'keys.json');
    writeFileSync(file, JSON.stringify(set));
    expect(
      resolveServiceKeys('worktree', signingSettingsFromEnv({ TOOLGATE_SIGNING_KEYS_FILE: file }))
        .identity,
    ).toBe('worktree');
    let err: unknown;
    try {
      resolveServiceKeys(
        'journal',
        signingSettingsFromEnv({ TOOLGATE_SIGNING_KEY: set.privateKeys.journal }),
      );
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'config', message: expect.stringContaining('public keys') });
    expect(secretsIn(err, Object.values(set.privateKeys))).toEqual([]);
    // Another identity's private key under this one's name: refused, without echoing it.
    try {
      resolveServiceKeys(
        'gateway',
        signingSettingsFromEnv({
          TOOLGATE_SIGNING_KEY: set.privateKeys.journal,
          TOOLGATE_SIGNING_PUBLIC_KEYS: publicKeys,
        }),
      );
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'config' });
    expect(secretsIn(err, Object.values(set.privateKeys))).toEqual([]);
  });

  it('signs events v2 unless TOOLGATE_EVENT_SIGNATURES says v1; another value is refused', () => {
    const env = { XDG_STATE_HOME: state };
    expect(resolveServiceKeys('gateway', signingSettingsFromEnv(env)).eventSignatures).toBe('v2');
    const v1 = signingSettingsFromEnv({ ...env, TOOLGATE_EVENT_SIGNATURES: 'v1' });
    expect(resolveServiceKeys('gateway', v1).eventSignatures).toBe('v1');
    expect(() => signingSettingsFromEnv({ ...env, TOOLGATE_EVENT_SIGNATURES: 'v3' })).toThrow(
      expect.objectContaining({ code: 'config' }),
    );
  });

  it('creates one development keyring per machine (0600) that every process then reads', () => {
    const env = { XDG_STATE_HOME: state };
    const first = devKeySet(env);
    expect(statSync(devKeyringPath(env)).mode & 0o777).toBe(0o600);
    expect(devKeySet(env)).toEqual(first);
    const a = resolveServiceKeys('permission-evaluator', signingSettingsFromEnv(env));
    const b = resolveServiceKeys('tool-executor', signingSettingsFromEnv(env));
    const h = new Map<string, string>();
    const headers = {
      get: (k: string) => h.get(k) ?? '',
      set: (k: string, v: string) => void h.set(k, v),
    };
    const payload = new TextEncoder().encode('{}');
    a.signEvent('p.journal.t.r.d.decided', 'decided', payload, headers);
    expect(b.verifyEvent('p.journal.t.r.d.decided', payload, headers)).toBeNull();
  });
});
