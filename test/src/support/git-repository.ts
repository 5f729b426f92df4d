import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A new temp directory `<prefix>…` holding a git repository (branch `main`) with one commit of
 * `files` (relative path → content): an executor's working directory, a worktree service's host.
 */
export async function committedRepository(
  prefix: string,
  files: Record<string, string> = { 'hello.txt': 'hello, toolgate\n' },
): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.invalid', ...args], {
      cwd: dir,
    });
  git('init', '-q', '-b', 'main');
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), content);
  }
  git('add', '-A');
  git('commit', '-q', '-m', 'base');
  return dir;
}
