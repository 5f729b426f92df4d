import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ErrorCode, hasErrorCode } from '@toolgate/contracts';
import { connectionOptions } from './toolgate-client';

const base = { token: 't', tenant: 'acme' };

describe('createClient: NATS credentials and inbox prefix', () => {
  it('takes replies on _INBOX_<tenant> by default, as a production team user must', () => {
    expect(connectionOptions(base)).toMatchObject({ inboxPrefix: '_INBOX_acme' });
    expect(connectionOptions({ ...base, inboxPrefix: '_INBOX_x' }).inboxPrefix).toBe('_INBOX_x');
  });

  it('passes user/password and a NATS token to the connection', () => {
    expect(connectionOptions({ ...base, user: 'team-acme', password: 'pw' })).toMatchObject({
      user: 'team-acme',
      pass: 'pw',
    });
    expect(connectionOptions({ ...base, natsToken: 'nt' })).toMatchObject({ token: 'nt' });
  });

  it('reads a creds file into an authenticator', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sdk-creds-'));
    const file = path.join(dir, 'team.creds');
    await writeFile(file, 'not really creds');
    try {
      expect(typeof connectionOptions({ ...base, credsFile: file }).authenticator).toBe('function');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ user: 'u', password: 'p', natsToken: 'n' }, 'user/password and natsToken'],
    [{ natsToken: 'n', credsFile: '/x' }, 'natsToken and credsFile'],
    [{ user: 'u' }, 'go together'],
  ])('refuses %j with a config error', (extra, message) => {
    let thrown: unknown;
    try {
      connectionOptions({ ...base, ...extra });
    } catch (err) {
      thrown = err;
    }
    expect(hasErrorCode(thrown, ErrorCode.Config)).toBe(true);
    expect((thrown as Error).message).toContain(message);
  });

  it('names no path when a creds file cannot be read', () => {
    let thrown: unknown;
    try {
      connectionOptions({ ...base, credsFile: '/nonexistent/secret-dir/team.creds' });
    } catch (err) {
      thrown = err;
    }
    expect(hasErrorCode(thrown, ErrorCode.Config)).toBe(true);
    expect((thrown as Error).message).not.toContain('secret-dir');
  });
});
