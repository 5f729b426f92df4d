import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEV_TOKEN_GRANT, defaultWorktreeRoot, loadAllInOneOptions } from './all-in-one';

const GRANT = {
  token: 'ops-token-0123456789abcdef',
  tenant: 'acme',
  identity: 'svc:ops',
  scopes: ['admin'],
};

describe('loadAllInOneOptions', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'allinone-spec-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('activates the development token when TOOLGATE_TOKENS is unset', () => {
    expect(loadAllInOneOptions({}).gateway.tokens).toEqual([DEV_TOKEN_GRANT]);
  });

  it('uses the configured grants, and no development token, when TOOLGATE_TOKENS is set', () => {
    const tokens = loadAllInOneOptions({ TOOLGATE_TOKENS: JSON.stringify([GRANT]) }).gateway.tokens;
    expect(tokens).toEqual([GRANT]);
  });

  it('an explicitly empty TOOLGATE_TOKENS does not fall back to the well-known development token', () => {
    expect(loadAllInOneOptions({ TOOLGATE_TOKENS: '[]' }).gateway.tokens).toEqual([]);
  });

  it('an empty TOOLGATE_TOKENS_FILE value activates no token at all, the development one included', () => {
    expect(loadAllInOneOptions({ TOOLGATE_TOKENS_FILE: '' }).gateway.tokens).toEqual([]);
  });

  it('reads the grants from TOOLGATE_TOKENS_FILE, and no development token', () => {
    const file = path.join(dir, 'tokens.json');
    writeFileSync(file, JSON.stringify([GRANT]));
    expect(loadAllInOneOptions({ TOOLGATE_TOKENS_FILE: file }).gateway.tokens).toEqual([GRANT]);
  });

  it('an empty TOOLGATE_TOKENS_FILE array does not fall back to the development token either', () => {
    const file = path.join(dir, 'empty.json');
    writeFileSync(file, '[]');
    expect(loadAllInOneOptions({ TOOLGATE_TOKENS_FILE: file }).gateway.tokens).toEqual([]);
  });

  it("gives the tools a workspace of the state directory, never the directory it runs from (Toolgate's own checkout)", () => {
    const { executor } = loadAllInOneOptions({ XDG_STATE_HOME: dir });
    expect(executor.cwd).toBe(realpathSync(path.join(dir, 'toolgate', 'workspace')));
    expect(statSync(executor.cwd).isDirectory()).toBe(true);
    // The checkout jest runs from holds the code every service loads: as a tool scope, refused.
    const installation = path.resolve(__dirname, '..', '..', '..');
    expect(() => loadAllInOneOptions({ XDG_STATE_HOME: dir, EXECUTOR_CWD: installation })).toThrow(
      expect.objectContaining({ code: 'config', details: { field: 'EXECUTOR_CWD' } }),
    );
    expect(() =>
      loadAllInOneOptions({
        XDG_STATE_HOME: dir,
        EXECUTOR_CWD: path.join(dir, 'elsewhere'),
        EXECUTOR_WRITE_PATHS: `.,${installation}`,
      }),
    ).toThrow(expect.objectContaining({ details: { field: 'EXECUTOR_WRITE_PATHS' } }));
    // A folder of it (a package's sources), or the modules npm start compiled: refused too.
    for (const inside of [
      path.join(installation, 'libs'),
      path.join(installation, 'node_modules'),
    ]) {
      expect(() => loadAllInOneOptions({ XDG_STATE_HOME: dir, EXECUTOR_CWD: inside })).toThrow(
        expect.objectContaining({ details: { field: 'EXECUTOR_CWD' } }),
      );
    }
    // Read-only: allowed.
    expect(
      loadAllInOneOptions({ XDG_STATE_HOME: dir, EXECUTOR_READ_PATHS: installation }).executor.cwd,
    ).toBe(executor.cwd);
  });

  it("defaults the worktree repository to the tools' directory and the root to outside it", () => {
    const { worktree } = loadAllInOneOptions({ XDG_STATE_HOME: dir });
    expect(worktree.repo).toBe(path.join(dir, 'toolgate', 'workspace'));
    expect(path.isAbsolute(worktree.root)).toBe(true);
    expect(worktree.root.startsWith(path.join(dir, 'toolgate', 'worktrees') + path.sep)).toBe(true);
    expect(path.relative(worktree.repo!, worktree.root).startsWith('..')).toBe(true);
    // One root per repository, stable across starts.
    expect(loadAllInOneOptions({ XDG_STATE_HOME: dir }).worktree.root).toBe(worktree.root);
    expect(
      loadAllInOneOptions({ XDG_STATE_HOME: dir, EXECUTOR_CWD: '/srv/other' }).worktree.root,
    ).not.toBe(worktree.root);
  });

  it("gives the executor the worktree service's root, default or set", () => {
    const defaults = loadAllInOneOptions({ XDG_STATE_HOME: dir });
    expect(defaults.executor.worktreeRoot).toBe(defaults.worktree.root);
    const set = loadAllInOneOptions({ XDG_STATE_HOME: dir, WORKTREE_ROOT: '/srv/trees' });
    expect(set.worktree.root).toBe('/srv/trees');
    expect(set.executor.worktreeRoot).toBe('/srv/trees');
  });

  it('keeps the default worktree root out of a repository that holds the state directory', () => {
    const repo = path.join(dir, 'home-repo');
    const root = defaultWorktreeRoot(repo, { XDG_STATE_HOME: path.join(repo, '.state') });
    expect(path.relative(repo, root).startsWith('..')).toBe(true);
  });

  it('binds every internal health and metrics port where the gateway binds, unless set', () => {
    const hosts = (env: NodeJS.ProcessEnv) => {
      const o = loadAllInOneOptions(env);
      return [o.gateway, o.evaluator, o.executor, o.journal, o.worktree].map((c) => c.host);
    };
    expect(hosts({})).toEqual(Array(5).fill('0.0.0.0'));
    expect(hosts({ GATEWAY_HOST: '127.0.0.1' })).toEqual(Array(5).fill('127.0.0.1'));
    expect(hosts({ GATEWAY_HOST: '127.0.0.1', JOURNAL_HOST: '0.0.0.0' })).toEqual([
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      '0.0.0.0',
      '127.0.0.1',
    ]);
  });

  it('moves every internal port with GATEWAY_PORT, so a second copy does not collide', () => {
    const ports = (env: NodeJS.ProcessEnv) => {
      const o = loadAllInOneOptions(env);
      return [o.gateway, o.evaluator, o.executor, o.journal, o.worktree].map((c) => c.port);
    };
    expect(ports({})).toEqual([8080, 8081, 8082, 8083, 8084]);
    expect(ports({ GATEWAY_PORT: '9080' })).toEqual([9080, 9081, 9082, 9083, 9084]);
    expect(ports({ GATEWAY_PORT: '0' })).toEqual([0, 0, 0, 0, 0]);
    expect(ports({ GATEWAY_PORT: '9080', JOURNAL_PORT: '7000' })).toEqual([
      9080, 9081, 9082, 7000, 9084,
    ]);
    expect(() => ports({ GATEWAY_PORT: '65533' })).toThrow(/no room for the internal ports/);
  });

  it('resolves a relative EXECUTOR_CWD into an absolute worktree repository', () => {
    // Relative to where it runs: beside the checkout jest runs from (inside it is refused).
    const relative = path.relative(process.cwd(), path.join(dir, 'some', 'checkout'));
    const { worktree } = loadAllInOneOptions({ XDG_STATE_HOME: dir, EXECUTOR_CWD: relative });
    expect(worktree.repo).toBe(path.join(dir, 'some', 'checkout'));
    expect(path.isAbsolute(worktree.repo!)).toBe(true);
  });

  it('an explicit WORKTREE_ROOT and WORKTREE_REPO win over the defaults', () => {
    const { worktree } = loadAllInOneOptions({ WORKTREE_ROOT: dir, WORKTREE_REPO: '/srv/repo' });
    expect(worktree.root).toBe(dir);
    expect(worktree.repo).toBe('/srv/repo');
  });

  it('gives every service the same prefix and NATS settings', () => {
    const options = loadAllInOneOptions({
      TOOLGATE_PREFIX: 'tgx',
      NATS_URL: 'nats://nats.internal:4222',
    });
    for (const config of [
      options.gateway,
      options.evaluator,
      options.executor,
      options.journal,
      options.worktree,
    ]) {
      expect(config).toMatchObject({ prefix: 'tgx', natsUrl: 'nats://nats.internal:4222' });
    }
  });

  describe('service state outside every tool scope', () => {
    const errorOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err as { code: string; message: string; details?: Record<string, unknown> };
      }
      throw new Error('expected a refusal');
    };

    it('keeps the embedded database, the keyring and the worktrees out of the repository by default', () => {
      const repo = path.join(dir, 'fresh-clone');
      const state = path.join(dir, 'home-state');
      const options = loadAllInOneOptions({ EXECUTOR_CWD: repo, XDG_STATE_HOME: state });
      expect(options.journal.pglitePath).toBe(path.join(state, 'toolgate', 'journal-pglite'));
      expect(path.relative(repo, options.journal.pglitePath).startsWith('..')).toBe(true);
      expect(path.relative(repo, options.worktree.root).startsWith('..')).toBe(true);
    });

    it('refuses a PGlite directory inside EXECUTOR_CWD', () => {
      const repo = path.join(dir, 'repo-a');
      const error = errorOf(() =>
        loadAllInOneOptions({
          EXECUTOR_CWD: repo,
          JOURNAL_PGLITE_PATH: path.join(repo, '.toolgate', 'journal-pglite'),
        }),
      );
      expect(error).toMatchObject({
        code: 'config',
        details: { field: 'JOURNAL_PGLITE_PATH', scope: 'EXECUTOR_CWD' },
      });
    });

    it('refuses a state directory (the development keyring) inside a read path', () => {
      const shared = path.join(dir, 'shared');
      const error = errorOf(() =>
        loadAllInOneOptions({
          EXECUTOR_READ_PATHS: shared,
          XDG_STATE_HOME: path.join(shared, '.state'),
        }),
      );
      expect(error).toMatchObject({ code: 'config', details: { scope: 'EXECUTOR_READ_PATHS' } });
    });

    it('refuses a tokens file inside a write path, without showing a token', () => {
      const scratch = path.join(dir, 'scratch');
      mkdirSync(scratch, { recursive: true });
      const file = path.join(scratch, 'tokens.json');
      writeFileSync(file, JSON.stringify([GRANT]));
      const error = errorOf(() =>
        loadAllInOneOptions({ EXECUTOR_WRITE_PATHS: scratch, TOOLGATE_TOKENS_FILE: file }),
      );
      expect(error).toMatchObject({
        code: 'config',
        details: { field: 'TOOLGATE_TOKENS_FILE', scope: 'EXECUTOR_WRITE_PATHS' },
      });
      expect(error.message).not.toContain(GRANT.token);
      expect(error.message).not.toContain(scratch);
    });
  });
});
