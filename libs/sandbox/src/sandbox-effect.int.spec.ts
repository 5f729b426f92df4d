/**
 * Protected paths hold on the effect, proved with real bubblewrap: each route a hostile command
 * could take to replace a protected file — renaming a folder above it, `cd` into a fresh one,
 * links, an archive — runs for real, and the host file is byte for byte what it was. Each attack
 * first runs where the protected path is not protected, so the assertion can fail.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sandboxSpec } from '../test/sandbox-spec';

const SETTINGS = '.vscode/settings.json';
const WORKFLOW = '.github/workflows/ci.yml';
const ORIGINAL = Buffer.from('{"editor.formatOnSave": false}\n');
const WORKFLOW_ORIGINAL = Buffer.from('on: push\njobs: {}\n');
const spec = sandboxSpec({ prefix: 'tg-effect-', run: { protectedPaths: [SETTINGS, WORKFLOW] } });
const { sh } = spec;

beforeEach(async () => {
  await fs.mkdir(path.join(spec.work, '.vscode'));
  await fs.writeFile(path.join(spec.work, SETTINGS), ORIGINAL);
  await fs.mkdir(path.join(spec.work, '.github', 'workflows'), { recursive: true });
  await fs.writeFile(path.join(spec.work, WORKFLOW), WORKFLOW_ORIGINAL);
  await fs.writeFile(path.join(spec.work, 'src.txt'), 'src\n');
});

/** The attacks of issue 23 (finding 3) and their kin; each ends by writing `pwned` through the path. */
const ROUTES: Record<string, string> = {
  'rename the folder, make a new one and cd into it': `mv .vscode x; mkdir .vscode; cd .vscode && printf pwned > settings.json`,
  'rename the parent of the workflows folder': `mv .github g; mkdir -p .github/workflows && printf pwned > ${WORKFLOW}`,
  'rename the workflows folder itself': `mv .github/workflows .github/w; mkdir .github/workflows; printf pwned > ${WORKFLOW}`,
  'remove the folder and make it again': `rm -rf .vscode; mkdir .vscode; printf pwned > ${SETTINGS}`,
  'cd into the folder and rename it from inside': `cd .vscode && mv ../.vscode ../y; mkdir ../.vscode; printf pwned > ../${SETTINGS}`,
  'replace the folder with a symlink to a writable one': `mkdir z; mv .vscode old || rmdir .vscode; ln -sfn z .vscode; printf pwned > z/settings.json; printf pwned > ${SETTINGS}`,
  'hard-link the file elsewhere and write the link': `ln ${SETTINGS} hl && printf pwned > hl; printf pwned >> ${SETTINGS}`,
  'unpack an archive over the folder': `mkdir -p s/.vscode && printf pwned > s/.vscode/settings.json && tar -C s -cf a.tar .vscode && tar -xf a.tar; tar --overwrite -xf a.tar --transform 's,^,./,'`,
  'unpack an archive that renames on the way': `mkdir -p s && printf pwned > s/p && tar -C s -cf b.tar p && tar -xf b.tar --transform 's,^p$,${SETTINGS},'`,
  'move a new folder over the old one': `mkdir -p n && printf pwned > n/settings.json && mv -T n .vscode; cp -r n/. .vscode/`,
};

describe.each(Object.entries(ROUTES))('%s', (_name, attack) => {
  it('changes the host file where the path is not protected', async () => {
    await sh(attack, { protectedPaths: [] });
    const settings = await fs.readFile(path.join(spec.work, SETTINGS)).catch(() => undefined);
    const workflow = await fs.readFile(path.join(spec.work, WORKFLOW)).catch(() => undefined);
    expect(
      settings?.equals(ORIGINAL) === true && workflow?.equals(WORKFLOW_ORIGINAL) === true,
    ).toBe(false);
  });

  it('leaves the protected host files byte for byte unchanged', async () => {
    const result = await sh(`${attack}; echo ran`);
    expect(result.stdout.text()).toContain('ran');
    expect(await fs.readFile(path.join(spec.work, SETTINGS))).toEqual(ORIGINAL);
    expect(await fs.readFile(path.join(spec.work, WORKFLOW))).toEqual(WORKFLOW_ORIGINAL);
    expect((await fs.lstat(path.join(spec.work, '.vscode'))).isDirectory()).toBe(true);
    expect((await fs.lstat(path.join(spec.work, '.github'))).isDirectory()).toBe(true);
  });
});

it('keeps the rest of the directory writable, the folders above a protected path included', async () => {
  const result = await sh(
    'printf x > .vscode/extensions.json && printf y > .github/dependabot.yml && mv src.txt moved.txt && echo ok',
  );
  expect(result.stdout.text()).toBe('ok\n');
  expect(await fs.readFile(path.join(spec.work, '.vscode/extensions.json'), 'utf8')).toBe('x');
  expect(await fs.readFile(path.join(spec.work, 'moved.txt'), 'utf8')).toBe('src\n');
});

it('holds a nested repository: its folders cannot be renamed to carry .git away', async () => {
  execFileSync('git', ['init', '-q', path.join(spec.work, 'pkg', 'sub')]);
  const config = await fs.readFile(path.join(spec.work, 'pkg/sub/.git/config'));
  const result = await sh(
    'mv pkg p2; mv pkg/sub pkg/s2; mkdir -p pkg/sub/.git; printf pwned >> pkg/sub/.git/config; echo ran',
    { protectedPaths: ['pkg/sub/.git'] },
  );
  expect(result.stdout.text()).toBe('ran\n');
  expect(await fs.readFile(path.join(spec.work, 'pkg/sub/.git/config'))).toEqual(config);
});

describe('a symlink named like a protected path, left by an earlier call', () => {
  it('does not stop later runs, dangling or not, and no error names a host path', async () => {
    // What `tar --transform` left behind in issue 23 (finding 6).
    await sh(
      `tar -cf l.tar --transform 's,^src.txt$,.env,' --absolute-names src.txt; ln -s /nonexistent .git`,
      {
        protectedPaths: [],
      },
    );
    await fs.symlink('/etc/hostname', path.join(spec.work, '.npmrc'));
    await fs.symlink('missing-dir', path.join(spec.work, '.husky'));
    for (let i = 0; i < 3; i++) {
      const result = await sh('echo again', {
        protectedPaths: ['.git', '.npmrc', '.husky', SETTINGS, WORKFLOW],
      });
      expect(result.stdout.text()).toBe('again\n');
      expect(result.exitCode).toBe(0);
    }
  });

  it('keeps what the link reaches inside the directory read-only', async () => {
    await fs.rename(path.join(spec.work, '.vscode'), path.join(spec.work, 'vs'));
    await fs.symlink('vs', path.join(spec.work, '.vscode'));
    const result = await sh(
      `printf pwned > vs/settings.json; printf pwned > ${SETTINGS}; mv vs v2; echo ran`,
    );
    expect(result.stdout.text()).toBe('ran\n');
    expect(await fs.readFile(path.join(spec.work, 'vs/settings.json'))).toEqual(ORIGINAL);
  });
});
