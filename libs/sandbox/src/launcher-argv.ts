/**
 * The script the host runs first, before bubblewrap, as `bash --norc --noprofile -c`:
 * - it closes every file descriptor above `keep` (stderr, or the last descriptor the run passes to
 *   bubblewrap on purpose) that the service inherited without close-on-exec (a socket or pipe the
 *   service's own parent leaked), so none reaches bubblewrap or the tool;
 * - when the run has cgroups (`$0`: their directories, separated by `:` — pids, memory), it moves
 *   itself into each before anything forks;
 * - then it becomes bubblewrap (exec), so it costs no process of its own.
 * Fixed text: the cgroup directory and the argv are arguments, never spliced into it. `--norc`:
 * bash reads ~/.bashrc when its stdin is a socket (Node's pipes are), even for `-c`.
 */
const LAUNCHER_SCRIPT =
  'keep=$1; shift; ' +
  'for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt "$keep" ] && [ -e "$f" ] && exec {n}>&-; done; ' +
  'cgroups=$0; while [ -n "$cgroups" ]; do c=${cgroups%%:*}; ' +
  '[ "$c" = "$cgroups" ] && cgroups= || cgroups=${cgroups#*:}; ' +
  'echo $$ > "$c/cgroup.procs" || exit 125; done; ' +
  'exec "$@"';

/**
 * The whole environment of the launcher and of bubblewrap, on the host. Fixed: a variable from the
 * service or a tool (`BASH_ENV`, `LD_PRELOAD`, …) would run code on the host, outside the sandbox.
 * The command's own environment is set inside the sandbox (see `bwrapArgv`).
 */
export const LAUNCHER_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: '/usr/bin:/bin:/usr/sbin:/sbin',
});

/**
 * `argv` started through {@link LAUNCHER_SCRIPT}, in `cgroup` when given (one directory, or
 * several), keeping descriptors up to `keep` (2: stdio only). Pure.
 */
export function launcherArgv(
  bash: string,
  cgroup: string | readonly string[] | undefined,
  argv: readonly string[],
  keep = 2,
): string[] {
  return [
    bash,
    '--norc',
    '--noprofile',
    '-c',
    LAUNCHER_SCRIPT,
    typeof cgroup === 'string' ? cgroup : (cgroup ?? []).join(':'),
    String(keep),
    ...argv,
  ];
}
