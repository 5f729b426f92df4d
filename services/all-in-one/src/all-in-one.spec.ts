import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEV_TOKEN_GRANT, loadAllInOneOptions } from './all-in-one';

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

  it('defaults the worktree root and repository to absolute paths', () => {
    const { worktree } = loadAllInOneOptions({});
    expect(path.isAbsolute(worktree.root)).toBe(true);
    expect(worktree.root).toBe(path.resolve('.toolgate/worktrees'));
    expect(worktree.repo).toBe(path.resolve(process.cwd()));
  });

  it('resolves a relative EXECUTOR_CWD into an absolute worktree repository', () => {
    const { worktree } = loadAllInOneOptions({ EXECUTOR_CWD: 'some/checkout' });
    expect(worktree.repo).toBe(path.resolve('some/checkout'));
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
});
