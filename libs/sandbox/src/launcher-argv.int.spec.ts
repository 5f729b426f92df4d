import { execFileSync } from 'node:child_process';
import { launcherArgv } from './launcher-argv';

const bash = '/bin/bash';
/** Runs argv under a parent that leaks fd 7 (opened without close-on-exec, as a careless parent would). */
function withLeakedFd(argv: string[]): string {
  return execFileSync(bash, ['--norc', '-c', 'exec 7</dev/null; exec "$@"', 'leaky', ...argv], {
    encoding: 'utf8',
  });
}

it('closes descriptors inherited without close-on-exec before the command runs', () => {
  const fds = (out: string) => out.trim().split('\n');
  expect(fds(withLeakedFd(['ls', '/proc/self/fd']))).toContain('7');
  expect(fds(withLeakedFd(launcherArgv(bash, undefined, ['ls', '/proc/self/fd'])))).toEqual([
    '0',
    '1',
    '2',
    '3',
  ]);
});

it('keeps the descriptors it is told to keep, and closes the rest', () => {
  expect(
    withLeakedFd(launcherArgv(bash, undefined, ['ls', '/proc/self/fd'], 7))
      .trim()
      .split('\n'),
  ).toEqual(['0', '1', '2', '3', '7']);
});

it('passes argv through untouched: no word splitting, no expansion', () => {
  const [program, ...args] = launcherArgv(bash, undefined, [
    'printf',
    '%s|',
    'a b',
    '$HOME',
    '*',
    '; rm -rf /',
  ]);
  const out = execFileSync(program!, args, { encoding: 'utf8' });
  expect(out).toBe('a b|$HOME|*|; rm -rf /|');
});
