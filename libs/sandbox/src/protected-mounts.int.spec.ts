/**
 * The set-up window of protected mounts, attacked at its exact point: between resolving the
 * protected paths (`resolveProtectedMounts`, in `Sandbox.plan`) and opening the descriptors they are
 * bound from (`openProtectedMounts`, in `Sandbox.prepare`), a concurrent call of the same directory
 * renames a folder on the way to a protected path and puts a symlink to a host folder in its place.
 * Opening by the resolved path would then bind the host file (and the host folder, writable, as the
 * folder on the way); the check on each descriptor's real path must refuse the run instead (`Sandbox.prepare` then
 * closes every descriptor opened so far and starts nothing).
 */
import type { FileHandle } from 'node:fs/promises';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { openProtectedMounts, resolveProtectedMounts } from './protected-mounts';

let base: string;
let work: string;
let host: string;
let handles: FileHandle[];

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-mounts-')));
  work = path.join(base, 'work');
  host = path.join(base, 'host');
  await fs.mkdir(path.join(work, '.github', 'workflows'), { recursive: true });
  await fs.writeFile(path.join(work, '.github', 'workflows', 'ci.yml'), 'on: push\n');
  // The host folder the swap points at has the same shape, so every path still opens.
  await fs.mkdir(path.join(host, 'workflows'), { recursive: true });
  await fs.writeFile(path.join(host, 'workflows', 'ci.yml'), 'host secret\n');
  handles = [];
});

afterEach(async () => {
  await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
  await fs.rm(base, { recursive: true, force: true });
});

/** Renames `.github` away and puts a symlink to the host folder where it was. */
const swapAncestor = async () => {
  await fs.rename(path.join(work, '.github'), path.join(work, 'moved'));
  await fs.symlink(host, path.join(work, '.github'));
};

it('refuses the run when a folder above a protected path became a symlink since it was resolved', async () => {
  const planned = await resolveProtectedMounts(work, ['.github/workflows/ci.yml']);
  expect(planned).toEqual({
    protectedPaths: [path.join(work, '.github', 'workflows', 'ci.yml')],
    ancestorPaths: [path.join(work, '.github'), path.join(work, '.github', 'workflows')],
  });
  await swapAncestor();
  // The attack lands without the check: the planned path now opens the host's file.
  expect(await fs.readFile(planned.protectedPaths[0]!, 'utf8')).toBe('host secret\n');

  const error = await openProtectedMounts(work, planned, handles).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ToolgateError);
  expect((error as ToolgateError).code).toBe(ErrorCode.Config);
  expect((error as ToolgateError).message).toMatch(/symlink/);
  // The message names the path in the working directory only, never the host folder.
  expect((error as ToolgateError).message).not.toContain(host);
});

it('refuses the run when only a folder on the way is planned and it became a symlink', async () => {
  // The protected file is gone by the time it is opened (skipped); the folder above it is not.
  const planned = await resolveProtectedMounts(work, ['.github/workflows/ci.yml']);
  await swapAncestor();
  const error = await openProtectedMounts(
    work,
    { ancestorPaths: planned.ancestorPaths },
    handles,
  ).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect((error as ToolgateError | undefined)?.code).toBe(ErrorCode.Config);
});

it('binds what is there when nothing moved (the attack above is what fails)', async () => {
  const planned = await resolveProtectedMounts(work, ['.github/workflows/ci.yml']);
  await expect(openProtectedMounts(work, planned, handles)).resolves.toEqual(planned);
  expect(handles).toHaveLength(3);
});
