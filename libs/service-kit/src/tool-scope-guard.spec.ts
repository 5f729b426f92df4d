import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import {
  assertInstallationOutsideToolScope,
  assertStateOutsideToolScope,
  assertStdioScopesApart,
  defaultStateDir,
  installationPaths,
  signingStatePaths,
} from './tool-scope-guard';

let dir: string;
let repo: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'tg-scope-guard-')));
  repo = path.join(dir, 'repo');
  mkdirSync(path.join(repo, 'src'), { recursive: true });
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

const refusal = (env: NodeJS.ProcessEnv, state: { setting: string; path: string }[]) => {
  try {
    assertStateOutsideToolScope(env, state);
  } catch (err) {
    return err as { code: string; message: string; details?: unknown };
  }
  return undefined;
};

it('refuses state inside the scope a stdio MCP server runs in', () => {
  const scope = path.join(dir, 'mcp-scope');
  const upstreams = JSON.stringify([
    {
      name: 'notes',
      command: { argv: ['node', '/opt/server.mjs'], cwd: scope },
      tenants: ['acme'],
    },
  ]);
  const env = { EXECUTOR_CWD: repo, TOOLGATE_MCP_UPSTREAMS: upstreams };
  expect(
    refusal(env, [{ setting: 'TOOLGATE_SIGNING_KEYS_FILE', path: path.join(scope, 'keys.json') }]),
  ).toMatchObject({
    code: ErrorCode.Config,
    details: { field: 'TOOLGATE_SIGNING_KEYS_FILE', scope: 'TOOLGATE_MCP_UPSTREAMS' },
  });
  expect(
    refusal(env, [{ setting: 'TOOLGATE_SIGNING_KEYS_FILE', path: path.join(dir, 'keys.json') }]),
  ).toBeUndefined();
});

it('refuses state inside EXECUTOR_CWD, a read path or a write path, naming the settings only', () => {
  const secret = path.join(repo, 'keys.json');
  writeFileSync(secret, '{"privateKey":"SECRET-VALUE"}');
  const inCwd = refusal({ EXECUTOR_CWD: repo }, [
    { setting: 'TOOLGATE_SIGNING_KEYS_FILE', path: secret },
  ]);
  expect(inCwd).toMatchObject({
    code: ErrorCode.Config,
    details: { field: 'TOOLGATE_SIGNING_KEYS_FILE', scope: 'EXECUTOR_CWD' },
  });
  expect(inCwd!.message).toMatch(/^TOOLGATE_SIGNING_KEYS_FILE is inside EXECUTOR_CWD/);
  expect(inCwd!.message).not.toContain('SECRET-VALUE');
  expect(inCwd!.message).not.toContain(dir);

  const other = path.join(dir, 'shared');
  expect(
    refusal({ EXECUTOR_CWD: repo, EXECUTOR_READ_PATHS: `src,${other}` }, [
      { setting: 'JOURNAL_PGLITE_PATH', path: path.join(other, 'db') },
    ]),
  ).toMatchObject({ details: { scope: 'EXECUTOR_READ_PATHS' } });
  expect(
    refusal({ EXECUTOR_CWD: path.join(dir, 'elsewhere'), EXECUTOR_WRITE_PATHS: repo }, [
      { setting: 'WORKTREE_ROOT', path: path.join(repo, 'src', 'trees') },
    ]),
  ).toMatchObject({ details: { scope: 'EXECUTOR_WRITE_PATHS' } });
  expect(
    refusal({ EXECUTOR_CWD: repo, EXECUTOR_SANDBOX_READ_PATHS: other }, [
      { setting: 'TOOLGATE_TOKENS_FILE', path: path.join(other, 'tokens.json') },
    ]),
  ).toMatchObject({ details: { scope: 'EXECUTOR_SANDBOX_READ_PATHS' } });
});

it('sees through symlinks, and through paths that do not exist yet', () => {
  symlinkSync(repo, path.join(dir, 'alias'));
  expect(
    refusal({ EXECUTOR_CWD: path.join(dir, 'alias') }, [
      { setting: 'JOURNAL_PGLITE_PATH', path: path.join(repo, '.toolgate', 'journal-pglite') },
    ]),
  ).toMatchObject({ details: { field: 'JOURNAL_PGLITE_PATH' } });
});

it('lets state beside the scope, or in a directory merely named like it, through', () => {
  expect(
    refusal({ EXECUTOR_CWD: repo }, [
      { setting: 'WORKTREE_ROOT', path: `${repo}-worktrees` },
      { setting: 'JOURNAL_PGLITE_PATH', path: path.join(dir, 'state', 'journal-pglite') },
    ]),
  ).toBeUndefined();
});

it('the development keyring and the default state directory live under XDG_STATE_HOME', () => {
  const env = { XDG_STATE_HOME: path.join(repo, '.state') };
  expect(defaultStateDir(env)).toBe(path.join(repo, '.state', 'toolgate'));
  const [keyring] = signingStatePaths(env);
  expect(keyring!.path.startsWith(path.join(repo, '.state', 'toolgate') + path.sep)).toBe(true);
  expect(refusal({ ...env, EXECUTOR_CWD: repo }, signingStatePaths(env))).toMatchObject({
    details: { scope: 'EXECUTOR_CWD' },
  });
  expect(signingStatePaths({ TOOLGATE_SIGNING_KEYS_FILE: '/k.json' })).toEqual([
    { setting: 'TOOLGATE_SIGNING_KEYS_FILE', path: '/k.json' },
  ]);
  expect(signingStatePaths({ TOOLGATE_SIGNING_KEY: 'x' })).toEqual([]);
});

const stdio = (cwd: string) =>
  JSON.stringify([
    { name: 'notes', command: { argv: ['node', '/opt/server.mjs'], cwd }, tenants: ['acme'] },
  ]);

it("refuses a stdio MCP server's directory that overlaps the tools' project, either way", () => {
  const refusedWith = (env: NodeJS.ProcessEnv) => {
    try {
      assertStdioScopesApart(env);
    } catch (err) {
      return err as { code: string; details?: unknown };
    }
    return undefined;
  };
  for (const cwd of [repo, path.join(repo, 'src'), dir]) {
    expect(refusedWith({ EXECUTOR_CWD: repo, TOOLGATE_MCP_UPSTREAMS: stdio(cwd) })).toMatchObject({
      code: ErrorCode.Config,
      details: { field: 'TOOLGATE_MCP_UPSTREAMS', scope: 'EXECUTOR_CWD' },
    });
  }
  const out = path.join(dir, 'out');
  expect(
    refusedWith({
      EXECUTOR_CWD: repo,
      EXECUTOR_WRITE_PATHS: `.,${out}`,
      TOOLGATE_MCP_UPSTREAMS: stdio(path.join(out, 'server')),
    }),
  ).toMatchObject({ details: { scope: 'EXECUTOR_WRITE_PATHS' } });
  expect(
    refusedWith({ EXECUTOR_CWD: repo, TOOLGATE_MCP_UPSTREAMS: stdio(path.join(dir, 'mcp')) }),
  ).toBeUndefined();
});

it("refuses a scope a tool may write that overlaps Toolgate's installation, either way", () => {
  const installation = path.join(dir, 'app');
  const cache = path.join(dir, 'compiled');
  mkdirSync(installation);
  const refusedWith = (env: NodeJS.ProcessEnv) => {
    try {
      assertInstallationOutsideToolScope(env, [installation, cache]);
    } catch (err) {
      return err as { code: string; details?: unknown };
    }
    return undefined;
  };
  const refused = (field: string) => ({ code: ErrorCode.Config, details: { field } });
  expect(refusedWith({ EXECUTOR_CWD: dir })).toMatchObject(refused('EXECUTOR_CWD'));
  expect(refusedWith({ EXECUTOR_CWD: path.join(installation, 'libs') })).toMatchObject(
    refused('EXECUTOR_CWD'),
  );
  expect(
    refusedWith({ EXECUTOR_CWD: repo, EXECUTOR_WRITE_PATHS: `.,${path.join(cache, 'x')}` }),
  ).toMatchObject(refused('EXECUTOR_WRITE_PATHS'));
  expect(
    refusedWith({ EXECUTOR_CWD: repo, TOOLGATE_MCP_UPSTREAMS: stdio(installation) }),
  ).toMatchObject(refused('TOOLGATE_MCP_UPSTREAMS'));
  // Through a symlink too.
  symlinkSync(installation, path.join(dir, 'app-link'));
  expect(refusedWith({ EXECUTOR_CWD: path.join(dir, 'app-link') })).toMatchObject(
    refused('EXECUTOR_CWD'),
  );
  // Read scopes may hold it; a directory beside it is the tools' own.
  expect(refusedWith({ EXECUTOR_CWD: repo, EXECUTOR_READ_PATHS: installation })).toBeUndefined();
  // This process's own: the checkout jest runs from.
  expect(installationPaths()[0]).toBe(realpathSync(path.resolve(__dirname, '..', '..', '..')));
});
