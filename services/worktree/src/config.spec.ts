import { loadWorktreeConfig } from './config';

describe('loadWorktreeConfig', () => {
  it('applies defaults and restricts acquires to the configured repository', () => {
    const config = loadWorktreeConfig({ WORKTREE_ROOT: '/srv/wt', WORKTREE_REPO: '/srv/repo' });
    expect(config).toMatchObject({
      root: '/srv/wt',
      repo: '/srv/repo',
      allowedRepos: ['/srv/repo'],
      pinCap: 4,
      keepOnError: false,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('parses lists, numbers and booleans', () => {
    const config = loadWorktreeConfig({
      WORKTREE_ROOT: '/srv/wt',
      WORKTREE_ALLOWED_REPOS: '/a, /b',
      WORKTREE_PIN_CAP: '2',
      WORKTREE_KEEP_ON_ERROR: 'true',
    });
    expect(config).toMatchObject({ allowedRepos: ['/a', '/b'], pinCap: 2, keepOnError: true });
    expect(config.repo).toBeUndefined();
  });

  it('refuses bad values with a ConfigError', () => {
    expect(() => loadWorktreeConfig({ WORKTREE_PIN_CAP: '-1' })).toThrow(
      expect.objectContaining({ code: 'config' }),
    );
    expect(() => loadWorktreeConfig({ WORKTREE_ROOT: 'relative/dir' })).toThrow(
      expect.objectContaining({ code: 'config' }),
    );
    expect(() => loadWorktreeConfig({ WORKTREE_KEEP_ON_ERROR: 'maybe' })).toThrow(
      expect.objectContaining({ code: 'config' }),
    );
  });
});
