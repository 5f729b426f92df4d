import { spawnSync } from 'node:child_process';
import { openSync, closeSync, constants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { STAGE_REFUSED, STAGE_SCRIPT } from './runc-backend';

/**
 * The staging the runc backend does before runc binds protected paths: a path swapped after it
 * was checked (here: a different folder under the checked name) is refused, and the staged mount
 * never reaches the host's mount namespace.
 */
const O_PATH = 0o10000000;
let dir: string;

beforeEach(async () => {
  dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-stage-')));
  await fs.mkdir(path.join(dir, 'checked'));
  await fs.writeFile(path.join(dir, 'checked', 'f'), 'checked\n');
  await fs.mkdir(path.join(dir, 'swapped'));
  await fs.writeFile(path.join(dir, 'swapped', 'f'), 'swapped\n');
  await fs.mkdir(path.join(dir, 'stage'));
});

afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const stage = (source: string) => {
  const fd = openSync(path.join(dir, 'checked'), constants.O_NOFOLLOW | O_PATH);
  try {
    return spawnSync(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        'bash',
        '--norc',
        '-c',
        STAGE_SCRIPT,
        'stage',
        '1',
        source,
        path.join(dir, 'stage'),
        'cat',
        path.join(dir, 'stage', 'f'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe', fd], encoding: 'utf8' },
    );
  } finally {
    closeSync(fd);
  }
};

it('binds the checked folder and runs the command on it', async () => {
  const result = stage(path.join(dir, 'checked'));
  expect(result.status).toBe(0);
  expect(result.stdout).toBe('checked\n');
  // Nothing of the staging is left in the host's mount namespace.
  await expect(fs.readFile(path.join(dir, 'stage', 'f'))).rejects.toThrow();
});

it('refuses a path that is no longer the checked folder', () => {
  const result = stage(path.join(dir, 'swapped'));
  expect(result.status).toBe(STAGE_REFUSED);
  expect(result.stdout).toBe('');
});
