import {
  compilePermissionChain,
  compilePolicyDocument,
  compileProtectedPaths,
  describePermissionChain,
  evaluatePermission,
  parsePolicyDocument,
  type PermissionChain,
  type ProfilePermissions,
} from './index';
import { configError } from '../test/config-error';

const writeFile = { name: 'write_file', risk: 'write' as const };
const readFile = { name: 'read_file', risk: 'read' as const };
const shell = { name: 'shell', risk: 'execute' as const };

describe('the protected-path matcher', () => {
  const p = compileProtectedPaths();

  it.each([
    ['.git/config', '.git'],
    ['.git', '.git'],
    ['.git/', '.git'],
    ['./.git/hooks/pre-commit', '.git'],
    ['.GIT/x', '.git'],
    ['.Git/HEAD', '.git'],
    ['sub/.git', '.git'],
    ['sub/.git/config', '.git'],
    ['vendor/lib/.git/hooks/post-checkout', '.git'],
    ['/srv/repo/.git/config', '.git'],
    ['src/../.git/config', '.git'],
    ['a/b/../../.git/config', '.git'],
    ['.git/.', '.git'],
    ['.git.', '.git'],
    ['.git. . /config', '.git'],
    ['.git::$INDEX_ALLOCATION/config', '.git'],
    ['GIT~1/config', '.git'],
    ['.g\u200cit/config', '.git'],
    ['.gi\ufefft/hooks/x', '.git'],
    ['sub\\.git\\config', '.git'],
    ['.toolgate/journal-pglite/base', '.toolgate'],
    ['.env', '.env*'],
    ['.env.local', '.env*'],
    ['services/api/.ENV.production', '.env*'],
    ['.envrc', '.env*'],
    ['~/.ssh/authorized_keys', '.ssh'],
    ['/root/.ssh', '.ssh'],
    ['.npmrc', '.npmrc'],
    ['.netrc', '.netrc'],
    ['.git-credentials', '.git-credentials'],
    ['.gitconfig', '.gitconfig'],
    ['/home/u/.bashrc', '.bashrc'],
    ['.profile', '.profile'],
    ['.zshrc', '.zshrc'],
    ['.github/workflows/ci.yml', '.github/workflows'],
    ['.vscode/settings.json', '.vscode/settings.json'],
    ['.claude/settings.json', '.claude'],
    ['.husky/pre-commit', '.husky'],
    ['.pre-commit-config.yaml', '.pre-commit-config.yaml'],
    ['.cargo/config.toml', '.cargo/config.toml'],
    ['crates/a/.cargo/config', '.cargo/config'],
    ['CLAUDE.md', 'CLAUDE.md'],
    ['pkg/claude.md', 'CLAUDE.md'],
    ['AGENTS.md', 'AGENTS.md'],
    ['.cursorrules', '.cursorrules'],
    ['.idea/workspace.xml', '.idea'],
    ['.vscode/launch.json', '.vscode/launch.json'],
  ])('%j is protected by %s', (path, pattern) => {
    expect(p.match(path)).toEqual({ path, pattern });
  });

  it.each([
    'src/git.ts',
    '.gitignore',
    '.gitattributes',
    '.github/ISSUE_TEMPLATE.md',
    '.git/../src/a.ts',
    'docs/dot-git.md',
    'git/config',
    'environment.ts',
    '.vscode/extensions.json',
    '.cargo/registry/cache',
    'docs/AGENTS.md.txt',
    'README.md',
    '.',
    '',
  ])('%j is not protected', (path) => {
    expect(p.match(path)).toBeUndefined();
  });

  it.each([
    ['.vscode', '.vscode/settings.json'],
    ['pkg/.VSCode', '.vscode/settings.json'],
    ['.github', '.github/workflows'],
    ['.cargo', '.cargo/config.toml'],
    ['.config', '.config/git'],
    ['.docker', '.docker/config.json'],
    ['.git', '.git'],
    ['.github/workflows/x', '.github/workflows'],
  ])('a link at %j is on the way to %s', (path, pattern) => {
    expect(p.matchBelow(path)).toEqual({ path, pattern });
  });

  it.each(['src', '.gitx', 'docs/.vscodex', 'vscode', '.', ''])(
    'a link at %j is on the way to nothing protected',
    (path) => {
      expect(p.matchBelow(path)).toBeUndefined();
    },
  );

  it('reads what is on the way through ** and globs, and leaves out what an exception waives whole', () => {
    const q = compileProtectedPaths([
      { paths: ['deploy/**/secrets', '**/keys/*.pem', 'conf/*/hooks'] },
      { except: ['.github/workflows', '.docker/config.json'] },
    ]);
    expect(q.matchBelow('deploy')?.pattern).toBe('deploy/**/secrets');
    expect(q.matchBelow('deploy/prod/eu')?.pattern).toBe('deploy/**/secrets');
    expect(q.matchBelow('x/keys')?.pattern).toBe('**/keys/*.pem');
    expect(q.matchBelow('conf/any')?.pattern).toBe('conf/*/hooks');
    // `**/keys/*.pem` reaches below `keys` only: its leading `**` is any depth, not any folder.
    expect(q.matchBelow('x')).toBeUndefined();
    // Waived whole: `.github/workflows`; what else lies below `.github` still counts.
    expect(q.matchBelow('.github')?.pattern).toBe('.github/copilot-instructions.md');
    expect(q.matchBelow('.docker')).toBeUndefined();
    expect(q.matchBelow('.vscode')?.pattern).toBe('.vscode/settings.json');
  });

  it('adds patterns from every layer, with globs and ** across components', () => {
    const q = compileProtectedPaths([{ paths: ['*.pem'] }, { paths: ['deploy/**/secrets'] }]);
    expect(q.match('certs/server.PEM')?.pattern).toBe('*.pem');
    expect(q.match('deploy/prod/eu/secrets/db.yaml')?.pattern).toBe('deploy/**/secrets');
    expect(q.match('deploy/secrets')?.pattern).toBe('deploy/**/secrets');
    expect(q.match('deploy/prod/notes.md')).toBeUndefined();
    expect(q.match('.git/config')?.pattern).toBe('.git');
  });

  it('matches a tenant’s many-star globs and ** runs against long names and deep paths in linear time', () => {
    // A `.*` regular expression per star backtracked exponentially: 56 characters held the
    // evaluator (and every tenant behind it) for 100 s. These finish within the test's timeout.
    const q = compileProtectedPaths([
      { paths: ['*a*a*a*a*a*a*a*a*b', '**/a/**/a/**/a/**/a/**/b', 'x?*?*?*?y'] },
    ]);
    const long = 'a'.repeat(50_000);
    expect(q.match(long)).toBeUndefined();
    expect(q.match(`${long}b`)?.pattern).toBe('*a*a*a*a*a*a*a*a*b');
    const deep = Array.from({ length: 20_000 }, () => 'a').join('/');
    expect(q.match(deep)).toBeUndefined();
    expect(q.match(`${deep}/b/c`)?.pattern).toBe('**/a/**/a/**/a/**/a/**/b');
    expect(q.match(`x${'z'.repeat(20_000)}`)).toBeUndefined();
    expect(q.match('xabcdy')?.pattern).toBe('x?*?*?*?y');
    expect(q.match('xaby')).toBeUndefined();
  });

  it('an exception waives exactly what it names', () => {
    const q = compileProtectedPaths([
      { except: ['.github/workflows/docs.yml', '.claude', '.env.example'] },
    ]);
    expect(q.match('.github/workflows/docs.yml')).toBeUndefined();
    expect(q.match('.github/workflows/release.yml')?.pattern).toBe('.github/workflows');
    expect(q.match('.claude/settings.json')).toBeUndefined();
    // `.claude` does not cover `.git`: a repository inside it stays protected.
    expect(q.match('.claude/.git/config')?.pattern).toBe('.git');
    expect(q.match('.env.example')).toBeUndefined();
    expect(q.match('.env')?.pattern).toBe('.env*');
  });

  it.each([
    [{ except: ['**'] }],
    [{ except: ['*/.git'] }],
    [{ paths: ['**'] }],
    [{ paths: ['/etc/passwd'] }],
    [{ paths: ['~/.ssh'] }],
    [{ paths: ['a/../b'] }],
    [{ paths: [''] }],
  ])('refuses %j', (layer) => {
    expect(configError(() => compileProtectedPaths([layer]))).toBe(true);
  });

  it('takes the strictest effect of its layers', () => {
    expect(compileProtectedPaths().effect).toBe('ask');
    expect(compileProtectedPaths([{ effect: 'deny' }, { effect: 'ask' }]).effect).toBe('deny');
    expect(compileProtectedPaths([{ effect: 'ask' }], 'deny').effect).toBe('deny');
  });
});

describe('protected paths in the chain', () => {
  const standard = compilePermissionChain({}, { preset: 'standard' });
  const poisonedConfig = {
    path: '.git/config',
    content: '[core]\n\tfsmonitor = "touch /tmp/pwned"\n',
  };

  it('under standard, write_file to .git/config asks, naming the path (the fsmonitor attack)', async () => {
    const d = await evaluatePermission(standard, writeFile, poisonedConfig);
    expect(d).toMatchObject({
      verdict: 'ask',
      decidedBy: 'ask-rule',
      rule: {
        source: 'protected-paths',
        kind: 'protected-path',
        path: '.git/config',
        pattern: '.git',
      },
      approval: { onTimeout: 'deny' },
    });
    expect(d.reason).toContain('.git/config');
    expect(d.reason).toContain('protected');
  });

  it.each(['.git/hooks/pre-commit', '.GIT/x', 'sub/.git', 'sub/.git/config', 'a/../.git/config'])(
    'under standard, write_file to %s asks',
    async (path) => {
      const d = await evaluatePermission(standard, writeFile, { path, content: 'x' });
      expect(d).toMatchObject({ verdict: 'ask', rule: { kind: 'protected-path' } });
    },
  );

  it('under strict it is denied; with open and without a preset it asks', async () => {
    const strict = compilePermissionChain({}, { preset: 'strict' });
    expect(await evaluatePermission(strict, writeFile, poisonedConfig)).toMatchObject({
      verdict: 'deny',
      decidedBy: 'deny-rule',
      rule: { kind: 'protected-path', pattern: '.git' },
    });
    for (const chain of [
      compilePermissionChain({}, { preset: 'open' }),
      compilePermissionChain(),
    ]) {
      expect(await evaluatePermission(chain, writeFile, poisonedConfig)).toMatchObject({
        verdict: 'ask',
        rule: { kind: 'protected-path' },
      });
    }
  });

  it('other writes and reads of .git stay allowed', async () => {
    expect(
      await evaluatePermission(standard, writeFile, { path: 'src/a.ts', content: 'x' }),
    ).toMatchObject({ verdict: 'allow', decidedBy: 'default' });
    expect(await evaluatePermission(standard, readFile, { path: '.git/config' })).toMatchObject({
      verdict: 'allow',
    });
  });

  it('no allow covers a protected path: not a hook, not canUseTool', async () => {
    const layer: ProfilePermissions = { hooks: [() => 'allow'] };
    const byHook = compilePermissionChain({}, layer);
    expect(await evaluatePermission(byHook, writeFile, poisonedConfig)).toMatchObject({
      verdict: 'ask',
      rule: { kind: 'protected-path' },
    });
    const byCan = compilePermissionChain({ canUseTool: () => 'allow' });
    expect(await evaluatePermission(byCan, writeFile, poisonedConfig)).toMatchObject({
      verdict: 'ask',
      rule: { kind: 'protected-path' },
    });
    // The same hook still allows everything else.
    expect(
      await evaluatePermission(byHook, writeFile, { path: 'a.txt', content: '' }),
    ).toMatchObject({ verdict: 'allow', decidedBy: 'hook' });
  });

  it('a hook that rewrites the input into a protected path is caught on the new input', async () => {
    const chain = compilePermissionChain({
      hooks: [() => ({ modifiedInput: poisonedConfig })],
    });
    expect(
      await evaluatePermission(chain, writeFile, { path: 'a.txt', content: '' }),
    ).toMatchObject({ verdict: 'ask', input: poisonedConfig, rule: { kind: 'protected-path' } });
  });

  it('naming a path in except lets it through; deny rules still win', async () => {
    const waived = compilePermissionChain(
      { protectedPaths: { except: ['.github/workflows/docs.yml'] } },
      { preset: 'standard' },
    );
    const docs = { path: '.github/workflows/docs.yml', content: 'on: push' };
    expect(await evaluatePermission(waived, writeFile, docs)).toMatchObject({ verdict: 'allow' });
    expect(
      await evaluatePermission(waived, writeFile, { ...docs, path: '.github/workflows/ci.yml' }),
    ).toMatchObject({ verdict: 'ask', rule: { pattern: '.github/workflows' } });
    const denied = compilePermissionChain({ deny: [{ tool: 'write_file', reason: 'no writes' }] });
    expect(await evaluatePermission(denied, writeFile, poisonedConfig)).toMatchObject({
      verdict: 'deny',
      reason: 'no writes',
    });
  });

  it('the strictest effect wins: a profile cannot turn the engine deny into an ask', async () => {
    const chain = compilePermissionChain(
      { protectedPaths: { effect: 'deny' } },
      { preset: 'open', protectedPaths: { effect: 'ask' } },
    );
    expect(await evaluatePermission(chain, writeFile, poisonedConfig)).toMatchObject({
      verdict: 'deny',
    });
    expect(describePermissionChain(chain).protectedPaths).toMatchObject({
      effect: 'deny',
      patterns: expect.arrayContaining(['.git', '.toolgate', '.env*']),
    });
  });

  it('other tools write through the fields the policy names', async () => {
    const chain = compilePermissionChain({
      protectedPaths: { writeFields: { fs_write: ['target.path', 'extra'] }, paths: ['*.pem'] },
    });
    const fsWrite = { name: 'fs_write', risk: 'write' as const };
    expect(
      await evaluatePermission(chain, fsWrite, { target: { path: 'keys/server.pem' } }),
    ).toMatchObject({ verdict: 'ask', rule: { path: 'keys/server.pem', pattern: '*.pem' } });
    expect(
      await evaluatePermission(chain, fsWrite, { target: { path: 'a' }, extra: ['b', '.npmrc'] }),
    ).toMatchObject({ verdict: 'ask', rule: { pattern: '.npmrc' } });
    expect(
      await evaluatePermission(chain, fsWrite, { target: { path: 'src/a.ts' } }),
    ).toMatchObject({ verdict: 'allow' });
  });

  it('an inheriting child keeps its parent protection', async () => {
    const parent = compilePermissionChain({ protectedPaths: { paths: ['*.pem'], effect: 'deny' } });
    const child = compilePermissionChain({}, { inheritPermissions: true }, { parent });
    expect(
      await evaluatePermission(child, writeFile, { path: 'a.pem', content: '' }),
    ).toMatchObject({ verdict: 'deny', rule: { pattern: '*.pem' } });
  });

  it('a stored policy carries protectedPaths and refuses a bad one when it is saved', () => {
    const doc = parsePolicyDocument({
      engine: { protectedPaths: { paths: ['secrets/**'], except: ['.env.example'] } },
      profiles: { ci: { preset: 'strict' } },
    });
    const compiled = compilePolicyDocument(doc);
    expect(compiled.chainFor('ci').protectedPaths.effect).toBe('deny');
    expect(compiled.engine.protectedPaths.effect).toBe('ask');
    expect(
      configError(() => parsePolicyDocument({ engine: { protectedPaths: { except: ['**'] } } })),
    ).toBe(true);
    expect(
      configError(() => parsePolicyDocument({ engine: { protectedPaths: { effect: 'allow' } } })),
    ).toBe(true);
  });
});

describe('protected paths in shell commands', () => {
  const open = compilePermissionChain();
  const strict = compilePermissionChain({}, { preset: 'strict' });
  const run = (chain: PermissionChain, command: string) =>
    evaluatePermission(chain, shell, { command });

  it.each([
    ['echo "[core] fsmonitor = evil" > .git/config', '.git'],
    ['printf x >> .GIT/hooks/pre-commit', '.git'],
    ['cat payload 2> sub/.git/config', '.git'],
    ['echo x &> .toolgate/state', '.toolgate'],
    ['echo x >| ~/.bashrc', '.bashrc'],
    ['tee .git/hooks/pre-commit < payload', '.git'],
    ['cp payload sub/.git/config', '.git'],
    ['mv x .env', '.env*'],
    ['ln -s .git alias', '.git'],
    ['sed -i s/a/b/ .npmrc', '.npmrc'],
    ['git config core.fsmonitor "touch /tmp/pwned"', '.git'],
    ['git config --local core.hooksPath /tmp/hooks', '.git'],
    ['git log --output=.git/info/exclude', '.git'],
    ["sh -c 'echo evil > .git/config'", '.git'],
    ["bash -c 'cp x .ssh/authorized_keys'", '.ssh'],
    ['timeout 5 tee -a .github/workflows/ci.yml', '.github/workflows'],
    ['sudo tee .git/config', '.git'],
    ['cd .git && echo x > config', '.git'],
    ['find .git -name "*.sample" -delete', '.git'],
    ['python3 write.py --out=.git/config', '.git'],
    ['rsync -a evil/ host:.ssh/', '.ssh'],
    ['echo $(whoami) > .git/config', '.git'],
  ])('%s writes a protected path (%s)', async (command, pattern) => {
    const d = await run(open, command);
    expect(d).toMatchObject({ verdict: 'ask', rule: { kind: 'protected-path', pattern } });
    expect(await run(strict, command)).toMatchObject({ verdict: 'deny' });
  });

  it.each([
    'git status',
    'git log --oneline -5',
    'git diff HEAD~1 -- src',
    'git config --get user.name',
    'git config user.name',
    'git config --list',
    'cat .git/config',
    'ls -la .git/hooks',
    'grep -r fsmonitor .git/config',
    'cat < .git/HEAD',
    'wc -l .env.example 2>&1',
    'npm test > test.log 2>&1',
    'echo done > /dev/null',
    'git -P log -- .github/workflows',
  ])('%s does not (allowed without a preset)', async (command) => {
    expect(await run(open, command)).toMatchObject({ verdict: 'allow', decidedBy: 'default' });
  });

  it('a redirection to an expansion cannot be checked, so it asks and times out into a deny', async () => {
    const d = await run(open, 'echo x > "$TARGET"');
    expect(d).toMatchObject({
      verdict: 'ask',
      rule: { kind: 'protected-path', path: null },
      approval: { onTimeout: 'deny' },
    });
    expect(d.reason).toContain('$TARGET');
    expect(await run(open, 'echo x > out-*.log')).toMatchObject({ verdict: 'ask' });
  });
});
